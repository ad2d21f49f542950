package wasm_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/wasm"
)

// Load a plugins directory: 10-principal.wasm allows as "fixture-user",
// then 20-deny.wasm denies; the first deny ends the chain.
func ExampleLoad() {
	dir, _ := os.MkdirTemp("", "plugins")
	defer os.RemoveAll(dir)
	for file, fixture := range map[string]string{"10-principal.wasm": "principal", "20-deny.wasm": "deny"} {
		bin, _ := os.ReadFile(filepath.Join("..", "..", "testdata", "abi", fixture+".wasm"))
		_ = os.WriteFile(filepath.Join(dir, file), bin, 0o644)
	}
	_ = os.WriteFile(filepath.Join(dir, "20-deny.json"), []byte(`{"limits": {"instances": 2}}`), 0o644)

	ctx := context.Background()
	chain, err := wasm.Load(ctx, wasm.Dir(dir), wasm.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer chain.Close(ctx)
	for _, p := range chain.Plugins() {
		fmt.Println(p.File, p.Name, p.Phases, p.Limits.Instances > 0)
	}
	_, err = chain.Authorize(ctx, host.AuthorizeRequest{Method: "POST", Path: "/plants", Credential: "token"})
	fmt.Println(err)
	// Output:
	// 10-principal.wasm principal [authorize validate] true
	// 20-deny.wasm deny [authorize validate] true
	// 40355: denied by fixture
}
