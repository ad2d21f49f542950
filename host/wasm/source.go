package wasm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/plantgate/plantgate/host/pluginsig"
)

// File is one plugin as a Source hands it over: what a plugins directory
// holds as NN-name.wasm, NN-name.json and NN-name.sig.
type File struct {
	Name    string // the module's file name, "10-auth.wasm"
	Module  []byte
	Sidecar []byte // nil: no sidecar
	Sig     []byte // signature lines (package pluginsig); nil: unsigned
}

// Snapshot is a whole chain's files, in chain order, as a Source read them
// at one moment, and the Source's version of them.
type Snapshot struct {
	// Version numbers the source's chain when it has versions (the store's
	// manifest); 0 for a directory, and for a store nobody published to.
	Version uint64
	Files   []File
	// Sig holds the chain's signature lines (pluginsig.SignChain over
	// Version and ChainDigest(Files)).
	Sig []byte
	// Directory marks a plugins directory's snapshot: it has no chain
	// signature, each of its plugins is signed on its own, and whoever can
	// change the directory can change the gateway. Any other snapshot must
	// carry a valid chain signature when keys are trusted, whatever its
	// Version: a store's chain set to version 0 is not a directory.
	Directory bool
}

// checkChain verifies a snapshot's chain signature when keys are trusted
// (a directory has none: Snapshot.Directory).
func checkChain(trust *pluginsig.Keyring, snap Snapshot) error {
	if trust == nil || trust.Len() == 0 || snap.Directory {
		return nil
	}
	if err := trust.VerifyChain(snap.Version, ChainDigest(snap.Files), snap.Sig); err != nil {
		if snap.Version == 0 && len(snap.Files) == 0 && len(snap.Sig) == 0 {
			err = fmt.Errorf("%w (the store holds no chain: push plugins with plugin push --sign-key)", err)
		}
		return fmt.Errorf("chain version %d refused: %w", snap.Version, err)
	}
	return nil
}

// verifyFile checks one plugin's signature when keys are trusted.
func verifyFile(trust *pluginsig.Keyring, f File) error {
	if trust == nil || trust.Len() == 0 {
		return nil
	}
	if err := trust.Verify(strings.TrimSuffix(f.Name, ".wasm"), f.Module, f.Sidecar, f.Sig); err != nil {
		return fmt.Errorf("plugin %s: refused: %w", f.Name, err)
	}
	return nil
}

// Verify checks snap's signatures as a gateway trusting trust does before
// it loads anything: the chain signature (unless snap is a directory's) and
// every plugin's. The error is the one the gateway logs.
func Verify(trust *pluginsig.Keyring, snap Snapshot) error {
	if err := checkChain(trust, snap); err != nil {
		return err
	}
	for _, f := range snap.Files {
		if err := verifyFile(trust, f); err != nil {
			return err
		}
	}
	return nil
}

// Source is where a chain's plugin files come from: a directory (Dir) or
// the store. Load and Reloader read every chain through one.
type Source interface {
	// Snapshot reads the whole chain. An error names the file or key and
	// the reason.
	Snapshot(ctx context.Context) (Snapshot, error)
	// String names the source in logs and errors: a directory's path,
	// "store host:port".
	String() string
}

// Dir is the Source of a plugins directory.
//
// Every NN-name.wasm file (NN two digits, name of a-z, 0-9 and -) is a
// plugin, run in file-name order. An optional NN-name.json beside it is its
// Sidecar: its config and limits; an optional NN-name.sig holds its
// signatures. A .wasm file of another name, and a .json or .sig file
// without its .wasm, are errors; other files and subdirectories are
// ignored. A directory without plugins is the empty chain.
type Dir string

func (d Dir) String() string { return string(d) }

// Snapshot implements Source.
func (d Dir) Snapshot(ctx context.Context) (Snapshot, error) {
	names, err := pluginFiles(string(d))
	if err != nil {
		return Snapshot{}, err
	}
	files := make([]File, 0, len(names))
	for _, name := range names {
		path := filepath.Join(string(d), name)
		f := File{Name: name}
		if f.Module, err = os.ReadFile(path); err != nil {
			return Snapshot{}, fmt.Errorf("plugin %s: %w", name, err)
		}
		if f.Sidecar, err = readOptional(SidecarPath(path)); err != nil {
			return Snapshot{}, err
		}
		if f.Sig, err = readOptional(SigPath(path)); err != nil {
			return Snapshot{}, err
		}
		files = append(files, f)
	}
	return Snapshot{Files: files, Directory: true}, nil
}

func readOptional(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", filepath.Base(path), err)
	}
	return b, nil
}

// SigPath returns the signature file name that belongs to wasmPath.
func SigPath(wasmPath string) string {
	return strings.TrimSuffix(wasmPath, ".wasm") + ".sig"
}

// companions are the extensions of the files that belong to a module.
var companions = []string{".json", ".sig"}

// pluginFiles lists the plugin files of dir in order and checks the names
// of its .wasm, .json and .sig files.
func pluginFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("plugins directory: %w", err)
	}
	var wasms, others []string
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		switch name := e.Name(); filepath.Ext(name) {
		case ".wasm":
			if err := CheckFileName(name); err != nil {
				return nil, err
			}
			wasms = append(wasms, name)
		case ".json", ".sig":
			others = append(others, name)
		}
	}
	for _, name := range others {
		wasm := strings.TrimSuffix(name, filepath.Ext(name)) + ".wasm"
		if !slices.Contains(wasms, wasm) {
			return nil, fmt.Errorf("plugin %s: no %s beside it", name, wasm)
		}
	}
	slices.Sort(wasms)
	return wasms, nil
}
