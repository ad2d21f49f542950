package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/urfave/cli/v3"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/redis"
)

// maxTokenName bounds a token's name, which every request it makes carries
// to the plugins (the caller in both messages) and into the access log:
// docs/abi.md's message bounds count on it.
const maxTokenName = 128

// checkTokenName refuses a name a log line or a plugin message could not
// carry as it is: empty, over maxTokenName bytes, not UTF-8, or holding a
// control character (a newline would forge a log line).
func checkTokenName(name string) error {
	switch {
	case name == "":
		return errors.New("--name is empty: name who or what the token is for")
	case len(name) > maxTokenName:
		return fmt.Errorf("--name is %d bytes, over the %d a token name may have", len(name), maxTokenName)
	case !utf8.ValidString(name):
		return errors.New("--name is not UTF-8 text")
	}
	if err := reservedName(name); err != nil {
		return err
	}
	for i, r := range name {
		if unicode.IsControl(r) {
			return fmt.Errorf("--name holds the control character %U at byte %d: a token name is shown in logs and lists", r, i)
		}
	}
	return nil
}

// tokenPrefix marks Plantgate tokens so that secret scanners and people
// recognise one in a paste; it is part of the token, and of its digest.
const tokenPrefix = "pgt_"

func tokenCommand() *cli.Command {
	return &cli.Command{
		Name:        "token",
		Usage:       "manage bearer tokens (only their SHA-256 digests are stored)",
		Description: secretsHelp,
		Flags:       []cli.Flag{redisURLFlag, redisPasswordFileFlag},
		Commands: []*cli.Command{
			{
				Name:  "create",
				Usage: "create a token and print it once",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "name", Required: true, Usage: "who or what the token is for; shown in logs and lists"},
					&cli.StringSliceFlag{Name: "scope", Usage: "scope to grant (repeatable): " + strings.Join(host.AllScopes(), ", "), Value: []string{host.ScopePlantsWrite}},
					&cli.DurationFlag{Name: "expires", Usage: "lifetime, e.g. 720h; 0 never expires"},
				},
				Action: func(ctx context.Context, cmd *cli.Command) error {
					if cmd.String("name") == bootstrapName {
						return fmt.Errorf("the name %q is reserved for serve's --bootstrap-token: choose another", bootstrapName)
					}
					if err := checkTokenName(cmd.String("name")); err != nil {
						return err
					}
					return withStore(ctx, cmd, func(st *redis.Store) error {
						return createToken(ctx, st, cmd.Root().Writer, cmd.String("name"), cmd.StringSlice("scope"), cmd.Duration("expires"))
					})
				},
			},
			{
				Name:  "list",
				Usage: "list tokens: name, scopes, created, last used (to the minute), expires, state; never the tokens themselves",
				Action: func(ctx context.Context, cmd *cli.Command) error {
					return withStore(ctx, cmd, func(st *redis.Store) error { return listTokens(ctx, st, cmd.Root().Writer) })
				},
			},
			{
				Name:  "revoke",
				Usage: "revoke every token with this name; gateways see it within their --token-cache-ttl (1s by default)",
				Flags: []cli.Flag{&cli.StringFlag{Name: "name", Required: true, Usage: "name of the tokens to revoke"}},
				Action: func(ctx context.Context, cmd *cli.Command) error {
					return withStore(ctx, cmd, func(st *redis.Store) error {
						n, err := st.RevokeToken(ctx, cmd.String("name"))
						if err != nil {
							return err
						}
						if n == 0 {
							return fmt.Errorf("no token named %q", cmd.String("name"))
						}
						fmt.Fprintf(cmd.Root().Writer, "revoked %d token(s) named %q\n", n, cmd.String("name"))
						return nil
					})
				},
			},
		},
	}
}

// errNoStore answers a store command without --redis-url: an embedded
// store made here would vanish with this process, along with whatever the
// command did to it.
var errNoStore = errors.New("--redis-url (or PLANTGATE_REDIS_URL) is required: without it the gateway's store is embedded " +
	"inside `plantgate serve` and vanishes with that process, so this command has nothing to act on. " +
	"A token for the embedded store is the one serve starts with: --bootstrap-token or PLANTGATE_BOOTSTRAP_TOKEN " +
	"(`make run` prints one). To manage tokens and webhooks, run serve and this command with the same --redis-url")

func withStore(ctx context.Context, cmd *cli.Command, fn func(*redis.Store) error) error {
	url, err := redisURL(cmd)
	if err != nil {
		return err
	}
	if url == "" {
		return errNoStore
	}
	st, err := redis.Open(ctx, url, redis.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	return fn(st)
}

// createToken makes 32 random bytes into a token, stores its digest and
// prints the token: the only time it is ever shown.
func createToken(ctx context.Context, st host.TokenAdmin, out io.Writer, name string, scopes []string, expires time.Duration) error {
	for _, s := range scopes {
		if !slices.Contains(host.AllScopes(), s) {
			return fmt.Errorf("unknown scope %q: want one of %s", s, strings.Join(host.AllScopes(), ", "))
		}
	}
	if expires < 0 {
		return fmt.Errorf("--expires %s: must not be negative", expires)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return err
	}
	token := tokenPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	now := time.Now()
	t := host.Token{Digest: sha256.Sum256([]byte(token)), Name: name, Scopes: slices.Compact(slices.Sorted(slices.Values(scopes))), Created: now}
	if expires > 0 {
		t.Expires = now.Add(expires)
	}
	if err := st.PutToken(ctx, t); err != nil {
		return fmt.Errorf("store token: %w", err)
	}
	_, err := fmt.Fprintln(out, token)
	return err
}

func listTokens(ctx context.Context, st host.TokenAdmin, out io.Writer) error {
	tokens, err := st.Tokens(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tSCOPES\tCREATED\tLAST USED\tEXPIRES\tSTATE")
	for _, t := range tokens {
		expires, state := "never", "active"
		if !t.Expires.IsZero() {
			expires = t.Expires.UTC().Format(time.RFC3339)
			if time.Now().After(t.Expires) {
				state = "expired"
			}
		}
		if t.Revoked {
			state = "revoked"
		}
		lastUsed := "never"
		if !t.LastUsed.IsZero() {
			lastUsed = t.LastUsed.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, strings.Join(t.Scopes, " "), t.Created.UTC().Format(time.RFC3339), lastUsed, expires, state)
	}
	return w.Flush()
}
