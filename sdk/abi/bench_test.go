package abi_test

import (
	"encoding/json"
	"testing"

	"github.com/plantgate/plantgate/sdk/abi"
)

// BenchmarkMessages measures the compact encoding of each message that
// crosses the boundary per request, against a baseline in the same run:
// encoding/json of the same values, what a naive ABI would pay.
//
//	go test -run '^$' -bench Messages -benchmem ./sdk/abi/
func BenchmarkMessages(b *testing.B) {
	const credential = "pg_5J9x2mQvT7cR1nB8kW4zL6yH3dF0sA2eG9uP1oI7"
	buf := make([]byte, 0, 256)
	b.Run("AppendAuthorize", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = abi.AppendAuthorize(buf[:0], "POST", "/plants", credential)
		}
	})
	auth := abi.AppendAuthorize(nil, "POST", "/plants", credential)
	b.Run("ParseAuthorize", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := abi.ParseAuthorize(auth); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendValidate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = abi.AppendValidate(buf[:0], 12345, "Monstera deliciosa", "tropical", true, "ci")
		}
	})
	val := abi.AppendValidate(nil, 12345, "Monstera deliciosa", "tropical", true, "ci")
	b.Run("ParseValidate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := abi.ParseValidate(val); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendDecision", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = abi.AppendDecision(buf[:0], abi.VerdictAllow, 0, "ci")
		}
	})
	type plant struct {
		ID        int64  `json:"id"`
		Name      string `json:"name"`
		Tag       string `json:"tag"`
		Principal string `json:"principal"`
	}
	p := plant{12345, "Monstera deliciosa", "tropical", "ci"}
	b.Run("baseline-json-marshal-validate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	js, _ := json.Marshal(p)
	b.Run("baseline-json-unmarshal-validate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var q plant
			if err := json.Unmarshal(js, &q); err != nil {
				b.Fatal(err)
			}
		}
	})
}
