package main

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"

	"github.com/urfave/cli/v3"

	"github.com/plantgate/plantgate"
)

// scaffold holds the templates of a new plugin project.
//
//go:embed scaffold/*.tmpl
var scaffold embed.FS

// scaffoldOrder is the NN- of a new plugin's files: after the bundled
// bearer-auth (10) and plant-rules (20), and the guide's example (30).
const scaffoldOrder = "50"

// sdkDir is where a new project keeps its copy of the SDK module.
const sdkDir = "plantgate-sdk"

// pluginName is what a plugin name may be: it names the module, the
// NN-name.wasm file and the plugin in logs and metrics.
var pluginName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)

func pluginNewCommand() *cli.Command {
	return &cli.Command{
		Name:      "new",
		Usage:     "write a ready plugin project (one rule, a test, a Makefile, a sidecar and a copy of the SDK) into DIR (default: ./NAME)",
		ArgsUsage: "NAME [DIR]",
		Action: func(ctx context.Context, cmd *cli.Command) error {
			args := cmd.Args().Slice()
			if len(args) < 1 || len(args) > 2 {
				return errors.New("want NAME and an optional DIR: plantgate plugin new NAME [DIR]")
			}
			dir := args[0]
			if len(args) == 2 {
				dir = args[1]
			}
			return newPlugin(cmd.Root().Writer, args[0], dir, checkCommand())
		},
	}
}

// scaffoldData fills the templates.
type scaffoldData struct {
	Name      string // "name-cap"
	File      string // "50-name-cap", the drop-in name without .wasm
	GoVersion string // the go line of the SDK's go.mod
}

// checkCommand is the `make check` line's tail: the plain one when
// "plantgate" on PATH is this binary, else one that names this binary, so
// that a newcomer running bin/plantgate from the repository gets a check
// that works, with the SDK the project was written with.
func checkCommand() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if onPath, err := exec.LookPath("plantgate"); err == nil {
		a, errA := os.Stat(onPath)
		b, errB := os.Stat(exe)
		if errA == nil && errB == nil && os.SameFile(a, b) {
			return ""
		}
	}
	return exe
}

// newPlugin writes the project for name into dir, which must be missing or
// empty: nothing is ever overwritten. plantgate, when not empty, is the
// binary the next steps' `make check` names (it is not "plantgate" on PATH).
func newPlugin(out io.Writer, name, dir, plantgate string) error {
	if !pluginName.MatchString(name) {
		return fmt.Errorf("plugin name %q: want a lower-case letter, then up to 39 of a-z, 0-9 and -", name)
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s is not empty: plugin new writes only into a new or empty directory", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	goVersion, err := sdkGoVersion()
	if err != nil {
		return err
	}
	data := scaffoldData{Name: name, File: scaffoldOrder + "-" + name, GoVersion: goVersion}
	files := map[string]string{ // template → file in the project
		"main.go.tmpl":      "main.go",
		"main_test.go.tmpl": "main_test.go",
		"Makefile.tmpl":     "Makefile",
		"sidecar.json.tmpl": data.File + ".json",
		"go.mod.tmpl":       "go.mod",
		"gitignore.tmpl":    ".gitignore",
		"README.md.tmpl":    "README.md",
	}
	for tmpl, file := range files {
		t, err := template.ParseFS(scaffold, "scaffold/"+tmpl)
		if err != nil {
			return err
		}
		var b bytes.Buffer
		if err := t.Execute(&b, data); err != nil {
			return err
		}
		if err := writeNew(filepath.Join(dir, file), b.Bytes()); err != nil {
			return err
		}
	}
	if err := copySDK(filepath.Join(dir, sdkDir), goVersion); err != nil {
		return err
	}
	check := "make check    # plantgate plugin check " + data.File + ".wasm"
	if plantgate != "" {
		check = "make check PLANTGATE=" + plantgate + "    # plantgate is not on PATH: check with the binary that wrote this"
	}
	fmt.Fprintf(out, `wrote %[1]s: main.go (one validate rule), main_test.go, Makefile, %[2]s.json, go.mod, %[3]s/
next:
  cd %[1]s
  make test     # the rule's tests, natively
  make build    # %[2]s.wasm
  %[4]s
then copy %[2]s.json and %[2]s.wasm into the gateway's plugins directory
`, dir, data.File, sdkDir, check)
	return nil
}

// copySDK writes the SDK module the binary carries into dir: its packages'
// Go files without their tests, and a go.mod that requires nothing (the SDK
// uses the standard library only).
func copySDK(dir, goVersion string) error {
	err := fs.WalkDir(plantgate.SDKFiles, "sdk", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := plantgate.SDKFiles.ReadFile(p)
		if err != nil {
			return err
		}
		return writeNew(filepath.Join(dir, filepath.FromSlash(p)), b)
	})
	if err != nil {
		return err
	}
	mod := fmt.Sprintf("// A copy of the Plantgate SDK, written by `plantgate plugin new`.\nmodule github.com/plantgate/plantgate\n\ngo %s\n", goVersion)
	return writeNew(filepath.Join(dir, "go.mod"), []byte(mod))
}

// sdkGoVersion is the go line of the gateway's go.mod, which the SDK
// copy and the new project declare.
func sdkGoVersion() (string, error) {
	mod, err := plantgate.SDKFiles.ReadFile("go.mod")
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(mod)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			return v, nil
		}
	}
	return "", errors.New("the embedded go.mod has no go line")
}

// writeNew writes a file that must not exist yet.
func writeNew(file string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
