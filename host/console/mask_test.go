package console

import "testing"

func TestMaskConfig(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, config, want string }{
		{"none", "", ""},
		{"secret keys at any depth", `{"api_key":"k1","Password":"p","limit":5,"upstream":{"auth":{"user":"u"},"url":"https://x"},"list":[{"token":"t"}]}`,
			`{
  "Password": "•••",
  "api_key": "•••",
  "limit": 5,
  "list": [
    {
      "token": "•••"
    }
  ],
  "upstream": {
    "auth": "•••",
    "url": "https://x"
  }
}`},
		{"big numbers kept as written", `{"max":12345678901234567890}`, "{\n  \"max\": 12345678901234567890\n}"},
		{"a bare string", `"hunter2"`, Masked},
		{"not JSON", `{"a":`, Masked},
		{"an array of names", `["a","b"]`, "[\n  \"a\",\n  \"b\"\n]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var config []byte
			if tt.config != "" {
				config = []byte(tt.config)
			}
			if got := MaskConfig(config); got != tt.want {
				t.Fatalf("MaskConfig(%s) =\n%s\nwant\n%s", tt.config, got, tt.want)
			}
		})
	}
}
