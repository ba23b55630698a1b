// Package version holds Tokenvault's release version, the one place every
// part of the build reads it from: `caddy vault version`, the admin health
// report, the tokenvault_build_info metric and the root package's
// tokenvault.Version.
package version

// Version is Tokenvault's release, in semantic versioning without the
// leading "v". A release is tagged "v" + Version, so that a build that
// requires the module at that tag (xcaddy build --with
// github.com/tokenvault/tokenvault@v<Version>) shows the same version in
// `caddy build-info` and `caddy list-modules --versions`.
//
// 0.x: the configuration, CLI and store format may still change between
// minor releases, as semantic versioning allows before 1.0; CHANGELOG.md
// names every such change and how to upgrade.
const Version = "0.9.0"
