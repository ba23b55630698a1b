package caddymodule

import (
	"math"
	"net/url"
	"strconv"
	"testing"
)

func TestPageParams(t *testing.T) {
	tests := []struct {
		query            string
		number, size     int
		wantErrFieldName string
	}{
		{"", 1, 20, ""},
		{"page=3&size=100", 3, 100, ""},
		{"page=0", 0, 0, "page"},
		{"page=-1", 0, 0, "page"},
		{"page=x", 0, 0, "page"},
		{"size=101", 0, 0, "size"},
		{"size=0", 0, 0, "size"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			q, _ := url.ParseQuery(tt.query)
			n, s, err := pageParams(q)
			if tt.wantErrFieldName != "" {
				p := problemFor(err)
				if p.Status != 400 || p.Errors[tt.wantErrFieldName] == nil {
					t.Fatalf("want 400 naming %s, got %+v", tt.wantErrFieldName, p)
				}
				return
			}
			if err != nil || n != tt.number || s != tt.size {
				t.Fatalf("got %d %d %v", n, s, err)
			}
		})
	}
}

func TestPaginate(t *testing.T) {
	items := []int{1, 2, 3, 4, 5}
	tests := []struct {
		number, size int
		want         []int
		pages        int
	}{
		{1, 2, []int{1, 2}, 3},
		{3, 2, []int{5}, 3},
		{4, 2, []int{}, 3},
		{math.MaxInt, 100, []int{}, 1},
		{1, 100, []int{1, 2, 3, 4, 5}, 1},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.number)+"x"+strconv.Itoa(tt.size), func(t *testing.T) {
			p := paginate(items, tt.number, tt.size)
			if len(p.Data) != len(tt.want) || p.Pagination.TotalPages != tt.pages || p.Pagination.TotalItems != 5 {
				t.Fatalf("got %+v", p)
			}
			for i := range tt.want {
				if p.Data[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", p.Data, tt.want)
				}
			}
			if p.Data == nil {
				t.Fatal("data must be [] not null")
			}
		})
	}
}
