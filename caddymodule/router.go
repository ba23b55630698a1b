package caddymodule

import (
	"net/http"
	"slices"
	"strings"
)

// route is one operation of the API: a method, a path pattern whose
// "{name}" segments capture parameters, the permission it needs ("" for
// any authenticated caller) and its handler.
type route struct {
	method  string
	pattern string
	perm    string
	handle  func(*call) error
}

// router matches requests to routes. Static segments win over parameters
// (GET /applications/key before GET /applications/{id}), and a trailing
// slash is ignored.
type router struct {
	routes []compiledRoute
}

type compiledRoute struct {
	route
	segments []string
}

func newRouter(routes []route) *router {
	r := &router{}
	for _, rt := range routes {
		r.routes = append(r.routes, compiledRoute{route: rt, segments: splitPath(rt.pattern)})
	}
	// static segments first, so that a literal beats a parameter
	slices.SortStableFunc(r.routes, func(a, b compiledRoute) int {
		return strings.Count(a.pattern, "{") - strings.Count(b.pattern, "{")
	})
	return r
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// match finds the route for a method and path, with its parameters. A
// path that exists under other methods is a 405 naming them; anything
// else is a 404.
func (r *router) match(method, path string) (*route, map[string]string, error) {
	segs := splitPath(path)
	var allow []string
	for i := range r.routes {
		rt := &r.routes[i]
		params, ok := matchSegments(rt.segments, segs)
		if !ok {
			continue
		}
		if rt.method == method || (method == http.MethodHead && rt.method == http.MethodGet) {
			return &rt.route, params, nil
		}
		if !slices.Contains(allow, rt.method) {
			allow = append(allow, rt.method)
		}
	}
	if len(allow) > 0 {
		return nil, nil, &apiError{status: http.StatusMethodNotAllowed, detail: "method not allowed on this path", allow: allow}
	}
	return nil, nil, errStatus(http.StatusNotFound, "no such endpoint")
}

func matchSegments(pattern, path []string) (map[string]string, bool) {
	if len(pattern) != len(path) {
		return nil, false
	}
	var params map[string]string
	for i, p := range pattern {
		if strings.HasPrefix(p, "{") {
			if params == nil {
				params = make(map[string]string, 2)
			}
			params[p[1:len(p)-1]] = path[i]
			continue
		}
		if p != path[i] {
			return nil, false
		}
	}
	return params, true
}
