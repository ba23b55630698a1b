package caddymodule

import "net/http"

// Features of the interface past their shutdown date answer 400 naming
// their replacement, so a client still using one learns what to do
// instead of getting a bare 404. (request_reactor_id and
// response_reactor_id on proxies are refused by proxy validation; a
// token's privacy object is ignored like any unknown member.)

// shutDown returns a handler refusing a retired feature with msg.
func shutDown(msg string) func(*call) error {
	return func(*call) error { return errStatus(http.StatusBadRequest, msg) }
}

const (
	regenerateShutDown = "application key regenerate was shut down on 2024-10-17: create a new key with POST /applications/{id}/keys, then delete the old one"
	formulasShutDown   = "reactor formulas were shut down on 2024-02-14: use reactors with a code attribute"
)

// deprecatedRoutes are the retired endpoints.
func deprecatedRoutes() []route {
	routes := []route{
		{http.MethodPost, "/applications/{id}/regenerate", "", shutDown(regenerateShutDown)},
	}
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		routes = append(routes,
			route{m, "/reactor-formulas", "", shutDown(formulasShutDown)},
			route{m, "/reactor-formulas/{id}", "", shutDown(formulasShutDown)})
	}
	return routes
}
