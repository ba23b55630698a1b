package caddymodule

import (
	"net/url"
	"strconv"
)

// Offset pagination bounds from the interface.
const (
	defaultPageSize = 20
	maxPageSize     = 100
)

// pagination is the offset pagination object of list responses.
type pagination struct {
	TotalItems int `json:"total_items"`
	PageNumber int `json:"page_number"`
	PageSize   int `json:"page_size"`
	TotalPages int `json:"total_pages"`
}

// page is an offset-paginated list response.
type page[T any] struct {
	Pagination pagination `json:"pagination"`
	Data       []T        `json:"data"`
}

// pageParams reads page and size from the query: page ≥ 1 (default 1),
// 1 ≤ size ≤ 100 (default 20).
func pageParams(q url.Values) (number, size int, err error) {
	number, size = 1, defaultPageSize
	if v := q.Get("page"); v != "" {
		if number, err = strconv.Atoi(v); err != nil || number < 1 {
			return 0, 0, errField("page", "page must be a whole number of at least 1")
		}
	}
	if v := q.Get("size"); v != "" {
		if size, err = strconv.Atoi(v); err != nil || size < 1 || size > maxPageSize {
			return 0, 0, errField("size", "size must be a whole number from 1 to 100")
		}
	}
	return number, size, nil
}

// pageOffset is the offset of a page, capped so that it cannot overflow.
func pageOffset(number, size int) int {
	if number-1 > (1<<31)/size {
		return 1 << 31
	}
	return (number - 1) * size
}

// paginate cuts one page out of items; a page past the end is empty.
func paginate[T any](items []T, number, size int) page[T] {
	total := len(items)
	start := total
	if number-1 <= total/size { // guards the multiplication against overflow
		start = min((number-1)*size, total)
	}
	end := min(start+size, total)
	return page[T]{
		Pagination: pagination{
			TotalItems: total,
			PageNumber: number,
			PageSize:   size,
			TotalPages: (total + size - 1) / size,
		},
		Data: append(make([]T, 0, end-start), items[start:end]...),
	}
}
