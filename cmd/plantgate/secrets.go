package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/urfave/cli/v3"
)

// secretsHelp is said in --help: any local user can read a process's argv
// (ps, /proc/PID/cmdline), so a secret on the command line is a secret
// shared with the machine.
const secretsHelp = "Secrets (the bootstrap token, a Redis password) belong in environment variables or files, not in argv, which every local user can read: use PLANTGATE_BOOTSTRAP_TOKEN or --bootstrap-token-file, and PLANTGATE_REDIS_URL or --redis-password-file."

var redisPasswordFileFlag = &cli.StringFlag{
	Name:    "redis-password-file",
	Usage:   "read the Redis password from this file (e.g. a mounted secret; one trailing newline is ignored) instead of putting it in --redis-url",
	Sources: env("REDIS_PASSWORD_FILE"),
}

var bootstrapTokenFileFlag = &cli.StringFlag{
	Name:    "bootstrap-token-file",
	Usage:   "read the bootstrap token from this file (one trailing newline is ignored); the alternative to --bootstrap-token",
	Sources: env("BOOTSTRAP_TOKEN_FILE"),
}

// redisURL is --redis-url with the password from --redis-password-file put
// in, when one is given. Errors never show the URL or the password.
func redisURL(cmd *cli.Command) (string, error) {
	raw, file := cmd.String("redis-url"), cmd.String(redisPasswordFileFlag.Name)
	if file == "" {
		return raw, nil
	}
	if raw == "" {
		return "", errors.New("--redis-password-file needs --redis-url: the embedded store makes its own password")
	}
	password, err := readSecretFile("--redis-password-file", file)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("--redis-url: invalid url: %w", err)
	}
	if _, set := u.User.Password(); set {
		return "", errors.New("--redis-url holds a password and --redis-password-file gives one: give one or the other")
	}
	u.User = url.UserPassword(u.User.Username(), password)
	return u.String(), nil
}

// bootstrapToken is --bootstrap-token or the content of
// --bootstrap-token-file; "" when neither is given.
func bootstrapToken(cmd *cli.Command) (string, error) {
	token, file := cmd.String("bootstrap-token"), cmd.String(bootstrapTokenFileFlag.Name)
	switch {
	case file == "":
		return token, nil
	case token != "":
		return "", errors.New("--bootstrap-token and --bootstrap-token-file: give one or the other")
	}
	return readSecretFile("--bootstrap-token-file", file)
}

// readSecretFile reads a one-line secret, as editors and `echo` write it:
// a trailing newline (or CRLF) is not part of it.
func readSecretFile(flag, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if s == "" {
		return "", fmt.Errorf("%s %s: empty", flag, path)
	}
	return s, nil
}
