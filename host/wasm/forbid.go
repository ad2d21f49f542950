package wasm

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrAuthorizeForbidden is wrapped by the error of a load or reload refused
// because a plugin would serve the authorize phase
// (ReloadOptions.ForbidAuthorize).
var ErrAuthorizeForbidden = errors.New("an authorize plugin is loaded while serve runs with --insecure-no-auth, which hands the authorize phase no credential")

// authorizeForbidden names the plugins that serve the authorize phase.
func authorizeForbidden(plugins []*Plugin, dir string) error {
	var files []string
	for _, p := range plugins {
		if slices.Contains(p.info.Phases, "authorize") {
			files = append(files, p.info.File)
		}
	}
	return fmt.Errorf("%w: %s in %s", ErrAuthorizeForbidden, strings.Join(files, ", "), dir)
}
