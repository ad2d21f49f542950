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
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"github.com/urfave/cli/v3"

	"github.com/plantgate/plantgate"
)

// scaffold holds the templates of a new plugin project: one directory per
// language, scaffold/<lang>/, of text/template files.
//
// # Conventions
//
//   - Every file NAME.tmpl under scaffold/<lang>/ (subdirectories too) is
//     written into the project as NAME, executed with a [scaffoldData];
//     two names are special: "gitignore" is written as ".gitignore" (an
//     embedded dotfile would need all:), and "sidecar.json" as the drop-in
//     sidecar, File+".json".
//   - next.txt, executed with the same data, is what `plugin new` prints
//     when it is done: the files it wrote and the next commands (without
//     one, it lists the files written).
//   - The language's SDK is copied into the project's SDKDir
//     ([kitSDKs]), so the project builds offline, outside the repository.
//   - The project's Makefile has build (File+".wasm"), test and check
//     ($(PLANTGATE) plugin check File.wasm, PLANTGATE defaulting to
//     plantgate) targets.
//
//go:embed scaffold
var scaffold embed.FS

// langs are the languages `plugin new --lang` knows, in the order the
// help lists them: a directory under scaffold/ makes a language.
var langs = func() []string {
	entries, err := scaffold.ReadDir("scaffold")
	if err != nil {
		panic(err)
	}
	order := map[string]int{"go": 1, "rust": 2, "c": 3, "assemblyscript": 4, "rego": 5}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		if oa, ob := order[a], order[b]; oa != ob && oa != 0 && ob != 0 {
			return oa - ob
		}
		return strings.Compare(a, b)
	})
	return names
}()

// scaffoldOrder is the NN- of a new plugin's files: after the bundled
// bearer-auth (10) and plant-rules (20), and the guide's example (30).
const scaffoldOrder = "50"

// sdkDir is where a new project keeps its copy of the SDK.
const sdkDir = "plantgate-sdk"

// pluginName is what a plugin name may be: it names the module, the
// NN-name.wasm file and the plugin in logs and metrics.
var pluginName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)

func pluginNewCommand() *cli.Command {
	return &cli.Command{
		Name:      "new",
		Usage:     "write a ready plugin project (one rule, a test, a Makefile, a sidecar and a copy of the SDK) into DIR (default: ./NAME)",
		ArgsUsage: "NAME [DIR]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "lang", Value: "go", Usage: "the plugin's language: " + strings.Join(langs, ", ")},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			args := cmd.Args().Slice()
			if len(args) < 1 || len(args) > 2 {
				return errors.New("want NAME and an optional DIR: plantgate plugin new [--lang LANG] NAME [DIR]")
			}
			dir := args[0]
			if len(args) == 2 {
				dir = args[1]
			}
			return newPlugin(cmd.Root().Writer, cmd.String("lang"), args[0], dir, checkCommand())
		},
	}
}

// scaffoldData fills the templates of every language.
type scaffoldData struct {
	Name      string // "name-cap": the plugin's name, as given
	Ident     string // "name_cap": Name with - as _, for a Rust crate or a C identifier
	File      string // "50-name-cap": the drop-in name without .wasm or .json
	Dir       string // the project directory, as given
	SDKDir    string // "plantgate-sdk": where the project's copy of the SDK is
	GoVersion string // the go line of the Go SDK's go.mod
	// Check is the `make check` line next.txt prints: "make check    # ..."
	// or, when the plantgate on PATH is not this binary, one naming it.
	Check string
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

// newPlugin writes lang's project for name into dir, which must be missing
// or empty: nothing is ever overwritten. plantgate, when not empty, is the
// binary the next steps' `make check` names (it is not "plantgate" on PATH).
func newPlugin(out io.Writer, lang, name, dir, plantgate string) error {
	if !slices.Contains(langs, lang) {
		return fmt.Errorf("--lang %q: want one of %s", lang, strings.Join(langs, ", "))
	}
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
	data := scaffoldData{
		Name: name, Ident: strings.ReplaceAll(name, "-", "_"), File: scaffoldOrder + "-" + name,
		Dir: dir, SDKDir: sdkDir, GoVersion: goVersion,
		Check: "make check    # plantgate plugin check " + scaffoldOrder + "-" + name + ".wasm",
	}
	if plantgate != "" {
		data.Check = "make check PLANTGATE=" + plantgate + "    # plantgate is not on PATH: check with the binary that wrote this"
	}
	root := "scaffold/" + lang
	var next []byte
	var written []string
	err = fs.WalkDir(scaffold, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel := strings.TrimPrefix(p, root+"/")
		b, err := execTemplate(p, data)
		if err != nil {
			return err
		}
		if rel == "next.txt" {
			next = b
			return nil
		}
		file, ok := strings.CutSuffix(rel, ".tmpl")
		if !ok {
			return nil
		}
		switch path.Base(file) {
		case "gitignore":
			file = path.Join(path.Dir(file), ".gitignore")
		case "sidecar.json":
			file = path.Join(path.Dir(file), data.File+".json")
		}
		written = append(written, file)
		return writeNew(filepath.Join(dir, filepath.FromSlash(file)), b)
	})
	if err != nil {
		return err
	}
	if copyKitSDK, ok := kitSDKs[lang]; ok {
		if err := copyKitSDK(filepath.Join(dir, sdkDir), goVersion); err != nil {
			return err
		}
		if lang != "go" { // the Go SDK's guide is its package documentation
			if err := copyABI(filepath.Join(dir, sdkDir)); err != nil {
				return err
			}
		}
	}
	if next == nil { // a language without next.txt: say what was written
		next = fmt.Appendf(nil, "wrote %s: %s\nnext: cd %s, then see its README.md\n", dir, strings.Join(written, ", "), dir)
	}
	_, err = out.Write(next)
	return err
}

func execTemplate(name string, data scaffoldData) ([]byte, error) {
	t, err := template.ParseFS(scaffold, name)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// kitSDKs writes each language's SDK into a new project's SDKDir; a
// language without an entry (one whose kit comes from a package registry)
// gets none.
var kitSDKs = map[string]func(dir, goVersion string) error{
	"go":   copySDK,
	"rust": func(dir, _ string) error { return copyKit(dir, "sdk/rust", "Cargo.toml", "src/", "README.md") },
	"c": func(dir, _ string) error {
		return copyKit(dir, "sdk/c", "plantgate.h", "plantgate.c", "plantgate_testing.h", "plantgate_testing.c", "README.md")
	},
	"assemblyscript": func(dir, _ string) error {
		return copyKit(dir, "sdk/assemblyscript", "package.json", "index.ts", "exports.ts", "README.md", "assembly/")
	},
}

// copyABI writes docs/abi.md into a new project's kit directory, beside
// the kit's guide, which the project's README names.
func copyABI(dir string) error {
	b, err := plantgate.KitFiles.ReadFile("docs/abi.md")
	if err != nil {
		return err
	}
	return writeNew(filepath.Join(dir, "abi.md"), b)
}

// copyKit copies the files of the kit at root in plantgate.KitFiles whose
// paths (relative to root) are one of names, or start with one that ends
// in "/", into dir.
func copyKit(dir, root string, names ...string) error {
	return fs.WalkDir(plantgate.KitFiles, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel := strings.TrimPrefix(p, root+"/")
		if !slices.ContainsFunc(names, func(n string) bool {
			return rel == n || strings.HasSuffix(n, "/") && strings.HasPrefix(rel, n)
		}) {
			return nil
		}
		b, err := plantgate.KitFiles.ReadFile(p)
		if err != nil {
			return err
		}
		return writeNew(filepath.Join(dir, filepath.FromSlash(rel)), b)
	})
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
