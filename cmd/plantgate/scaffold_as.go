package main

import (
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/plantgate/plantgate"
)

// The AssemblyScript scaffold: templates in scaffold/assemblyscript/
// (NAME.tmpl is written as NAME, gitignore as .gitignore, sidecar.json as
// File+".json"; next.txt is the closing message) and a copy of the kit.

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
