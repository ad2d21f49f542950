package sdk_test

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/plantgate/plantgate/sdk"
)

// TestLevelString: a Level prints as the host's log shows it, which is
// log/slog's name for the same number.
func TestLevelString(t *testing.T) {
	for l := sdk.LevelDebug - 3; l <= sdk.LevelError+3; l++ {
		if got, want := l.String(), slog.Level(l).String(); got != want {
			t.Errorf("Level(%d).String() = %q, want %q", int32(l), got, want)
		}
	}
}

func ExampleLevel() {
	fmt.Println(sdk.LevelInfo, sdk.LevelWarn, sdk.LevelError+1)
	fmt.Printf("%v\n", sdk.LevelDebug)
	// Output:
	// INFO WARN ERROR+1
	// DEBUG
}
