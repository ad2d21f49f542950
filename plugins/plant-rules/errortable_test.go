package main

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// TestErrorTableCodes: the error table's plant-rules row names exactly the
// codes plant-rules answers (issue 33: it said 40051–40056 while the plugin
// answered 40050–40054).
func TestErrorTableCodes(t *testing.T) {
	b, err := os.ReadFile("../../docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`\(plant-rules: ([^)]*)\)`).FindSubmatch(b)
	if row == nil {
		t.Fatal("docs/errors.md names no plant-rules codes")
	}
	var got []int32
	for _, m := range regexp.MustCompile(`\b4\d{4}\b`).FindAll(row[1], -1) {
		n, _ := strconv.Atoi(string(m))
		got = append(got, int32(n))
	}
	want := []int32{codeID, codeNameLength, codeNameControl, codeTagLength, codeTagControl}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("docs/errors.md lists plant-rules codes %v, the plugin answers %v", got, want)
	}
}
