package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeSection returns the text of the README's "## title" section.
func readmeSection(t *testing.T, title string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, s, ok := strings.Cut(string(b), "\n## "+title+"\n")
	if !ok {
		t.Fatalf("README.md has no %q section", title)
	}
	if end := strings.Index(s, "\n## "); end >= 0 {
		s = s[:end]
	}
	return s
}

// TestReadmeOperations pastes the README's Operations commands into a
// shell against a gateway with the bundled plugins, as a newcomer does
// after make run, and checks each answer is the one its comment names. It
// also holds the section to what the bundled plant-rules answers for the
// ids it refuses (issue 33: it said lists put negative ids first, while
// plant-rules refuses every id below 1).
func TestReadmeOperations(t *testing.T) {
	t.Parallel()
	ops := readmeSection(t, "Operations")
	_, block, _ := strings.Cut(ops, "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	if !strings.Contains(block, "http://127.0.0.1:8080/") {
		t.Fatalf("the Operations block does not use make run's address:\n%s", block)
	}
	const token = "readme-operations-token-0123456789"
	g := startGateway(t, []string{"PLANTGATE_BOOTSTRAP_TOKEN=" + token}, "--plugins", pluginsDir(t, "10-bearer-auth.wasm", "20-plant-rules.wasm"))
	sh := exec.Command("bash", "-e", "-c", strings.ReplaceAll(block, "http://127.0.0.1:8080/", g.base+"/"))
	sh.Env = []string{"PATH=" + os.Getenv("PATH"), "TOKEN=" + token}
	out, err := sh.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	statuses := regexp.MustCompile(`(?m)^HTTP/1\.1 (\d+)`).FindAllStringSubmatch(string(out), -1)
	var got []string
	for _, s := range statuses {
		got = append(got, s[1])
	}
	if strings.Join(got, " ") != "200 200 200 204" {
		t.Errorf("create, read, list, delete answered %v, want 200 200 200 204\n%s", got, out)
	}
	for _, body := range []string{`{"name":"Monstera","tag":"tropical"}`, `{"id":1,"name":"Monstera","tag":"tropical"}`, `[{"id":1,"name":"Monstera","tag":"tropical"}]`} {
		if !strings.Contains(string(out), "\r\n\r\n"+body) {
			t.Errorf("no answer had the body %s\n%s", body, out)
		}
	}

	// What the section says about ids below 1 is what the gateway answers.
	status, body := post(t, g.base, token, `{"id":-1,"name":"Monstera"}`)
	if status != 400 || body != `{"error":40050,"message":"id must be at least 1, got -1"}` {
		t.Fatalf("POST id -1 = %d %s", status, body)
	}
	flat := strings.Join(strings.Fields(ops), " ")
	if !strings.Contains(flat, "ids below 1") || !strings.Contains(flat, "40050") {
		t.Errorf("the Operations section does not say that the bundled plant-rules refuses ids below 1 (400 error 40050)")
	}
	if strings.Contains(flat, "negative ids first") {
		t.Errorf("the Operations section orders negative ids without saying when there can be any")
	}
}
