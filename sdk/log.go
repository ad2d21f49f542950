package sdk

import (
	"fmt"

	"github.com/plantgate/plantgate/sdk/abi"
)

// Level is a log level with log/slog's numbering, so the host maps it
// directly to slog.Level.
type Level int32

// Log levels.
const (
	LevelDebug = Level(abi.LogDebug)
	LevelInfo  = Level(abi.LogInfo)
	LevelWarn  = Level(abi.LogWarn)
	LevelError = Level(abi.LogError)
)

// String names the level as log/slog does: "DEBUG", "INFO", "WARN",
// "ERROR", and a level between them as the one below plus the distance,
// "INFO+2".
func (l Level) String() string {
	name := func(base string, val Level) string {
		if l == val {
			return base
		}
		return fmt.Sprintf("%s%+d", base, l-val)
	}
	switch {
	case l < LevelInfo:
		return name("DEBUG", LevelDebug)
	case l < LevelWarn:
		return name("INFO", LevelInfo)
	case l < LevelError:
		return name("WARN", LevelWarn)
	}
	return name("ERROR", LevelError)
}

// Log writes msg to the host's log, attributed to the plugin. It does not
// allocate; the host cuts lines longer than [abi.MaxLog] bytes. Never log a
// credential.
//
//	sdk.Log(sdk.LevelWarn, "token store unavailable")
func Log(level Level, msg string) { hostLog(int32(level), msg) }

// Logf formats like fmt.Sprintf and writes the result to the host's log.
// Formatting allocates, so keep Logf off the allow path.
func Logf(level Level, format string, args ...any) {
	hostLog(int32(level), fmt.Sprintf(format, args...))
}
