package caddymodule

import (
	"fmt"
	"io"
	"reflect"
	"runtime/debug"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/spf13/cobra"

	"github.com/tokenvault/tokenvault/internal/version"
)

// modulePath is Tokenvault's Go module path, derived from this package's
// import path (github.com/tokenvault/tokenvault/caddymodule).
var modulePath = strings.TrimSuffix(reflect.TypeOf(App{}).PkgPath(), "/caddymodule")

// versionInfo is what `caddy vault version` prints.
type versionInfo struct {
	// Tokenvault is the release compiled in (internal/version).
	Tokenvault string
	// Module is Tokenvault's module as Go recorded it in the binary, the
	// line `caddy build-info` shows: "v0.9.0" for a build that required
	// the release, "(devel)" or a pseudo-version for a build of a
	// checkout, with " => <path> <version>" when it was replaced; "" when
	// the binary has no build information.
	Module string
	// Caddy is Caddy's version, as `caddy version` prints it.
	Caddy string
	// Go is the Go release that built the binary.
	Go string
}

// buildVersions reads the versions from the binary's build information.
func buildVersions(bi *debug.BuildInfo, caddyVersion string) versionInfo {
	v := versionInfo{Tokenvault: version.Version, Caddy: caddyVersion}
	if bi == nil {
		return v
	}
	v.Go = bi.GoVersion
	if bi.Main.Path == modulePath { // built from a checkout: caddymodule/caddy
		v.Module = bi.Main.Version
		return v
	}
	for _, dep := range bi.Deps {
		if dep.Path != modulePath {
			continue
		}
		v.Module = dep.Version
		if r := dep.Replace; r != nil {
			v.Module += " => " + r.Path
			if r.Version != "" {
				v.Module += " " + r.Version
			}
		}
	}
	return v
}

// write prints the versions, one per line.
func (v versionInfo) write(w io.Writer) error {
	lines := []string{"Tokenvault " + v.Tokenvault}
	if v.Module != "" {
		lines = append(lines, "module "+modulePath+" "+v.Module)
	}
	lines = append(lines, "Caddy "+v.Caddy)
	if v.Go != "" {
		lines = append(lines, v.Go)
	}
	_, err := fmt.Fprintln(w, strings.Join(lines, "\n"))
	return err
}

// versionCommand is "caddy vault version": Tokenvault's release, the
// module version Go recorded in the binary, Caddy's version and Go's.
// It needs no running server.
func versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Prints Tokenvault's version, and Caddy's",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			bi, _ := debug.ReadBuildInfo()
			_, full := caddy.Version()
			return buildVersions(bi, full).write(c.OutOrStdout())
		},
	}
}
