package main

import (
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/plantgate/plantgate"
)

// The AssemblyScript scaffold: templates in scaffold/assemblyscript/, the
// same scaffoldData as the Go ones, and a copy of the kit.

// asScaffoldFiles maps each AssemblyScript template to its file in the
// project; a template not listed becomes its name without .tmpl.
func asScaffoldFiles(data scaffoldData) map[string]string {
	return map[string]string{
		"package.json.tmpl":   "package.json",
		"asconfig.json.tmpl":  "asconfig.json",
		"index.ts.tmpl":       "index.ts",
		"index.test.mjs.tmpl": "index.test.mjs",
		"Makefile.tmpl":       "Makefile",
		"sidecar.json.tmpl":   data.File + ".json",
		"gitignore.tmpl":      ".gitignore",
		"README.md.tmpl":      "README.md",
	}
}

// copyASKit writes the AssemblyScript kit the binary carries into dir
// (the project's plantgate-sdk/): package.json, index.ts, exports.ts,
// README.md and assembly/*.ts, never overwriting a file.
func copyASKit(dir string) error {
	const root = "sdk/assemblyscript"
	return fs.WalkDir(plantgate.ASKitFiles, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := plantgate.ASKitFiles.ReadFile(p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, root+"/")
		return writeNew(filepath.Join(dir, filepath.FromSlash(path.Clean(rel))), b)
	})
}
