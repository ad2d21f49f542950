package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/webhook"
)

func webhookCommand() *cli.Command {
	return &cli.Command{
		Name:        "webhook",
		Usage:       "manage webhook endpoints (Standard Webhooks) and their deliveries",
		Description: secretsHelp,
		Flags:       []cli.Flag{redisURLFlag, redisPasswordFileFlag},
		Commands: []*cli.Command{
			{
				Name:  "add",
				Usage: "register an endpoint and print its id and secret (shown this once)",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "url", Required: true, Usage: "http(s) URL the events are POSTed to"},
					&cli.StringSliceFlag{Name: "event", Usage: "event type to send (repeatable): " + strings.Join(host.AllEvents, ", ") + "; default: all"},
					&cli.BoolFlag{Name: "allow-private", Usage: "accept a loopback, private or link-local address (gateways deliver there only with serve --webhook-allow-private)"},
				},
				Action: func(ctx context.Context, cmd *cli.Command) error {
					return withStore(ctx, cmd, func(st *redis.Store) error {
						return addEndpoint(ctx, st, cmd.Root().Writer, cmd.String("url"), cmd.StringSlice("event"), cmd.Bool("allow-private"))
					})
				},
			},
			{
				Name:  "list",
				Usage: "list endpoints: id, url, events, state, created; never the secrets",
				Action: func(ctx context.Context, cmd *cli.Command) error {
					return withStore(ctx, cmd, func(st *redis.Store) error { return listEndpoints(ctx, st, cmd.Root().Writer) })
				},
			},
			{
				Name:      "remove",
				Usage:     "remove an endpoint; its pending deliveries are dropped",
				ArgsUsage: "ID",
				Action: func(ctx context.Context, cmd *cli.Command) error {
					id := cmd.Args().First()
					if id == "" || cmd.NArg() != 1 {
						return fmt.Errorf("want one endpoint id")
					}
					return withStore(ctx, cmd, func(st *redis.Store) error {
						found, err := st.RemoveEndpoint(ctx, id)
						if err != nil {
							return err
						}
						if !found {
							return fmt.Errorf("no endpoint %q", id)
						}
						fmt.Fprintf(cmd.Root().Writer, "removed %s\n", id)
						return nil
					})
				},
			},
			{
				Name:  "deliveries",
				Usage: "list the newest deliveries: id, event, endpoint, state, attempts, last status, next try",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "failed", Usage: "only failed deliveries (the ones replay takes)"},
					&cli.IntFlag{Name: "limit", Value: 50, Usage: "most deliveries to list"},
				},
				Action: func(ctx context.Context, cmd *cli.Command) error {
					return withStore(ctx, cmd, func(st *redis.Store) error {
						return listDeliveries(ctx, st, cmd.Root().Writer, cmd.Bool("failed"), int(cmd.Int("limit")))
					})
				},
			},
			{
				Name:      "replay",
				Usage:     "deliver a failed delivery again, its attempts reset",
				ArgsUsage: "DELIVERY-ID",
				Action: func(ctx context.Context, cmd *cli.Command) error {
					id := cmd.Args().First()
					if id == "" || cmd.NArg() != 1 {
						return fmt.Errorf("want one delivery id")
					}
					return withStore(ctx, cmd, func(st *redis.Store) error {
						if err := st.ReplayDelivery(ctx, id); err != nil {
							return err
						}
						fmt.Fprintf(cmd.Root().Writer, "replaying %s\n", id)
						return nil
					})
				},
			},
		},
	}
}

func addEndpoint(ctx context.Context, st host.WebhookAdmin, out io.Writer, url string, events []string, allowPrivate bool) error {
	if len(events) == 0 {
		events = host.AllEvents
	}
	for _, e := range events {
		if !slices.Contains(host.AllEvents, e) {
			return fmt.Errorf("unknown event %q: want one of %s", e, strings.Join(host.AllEvents, ", "))
		}
	}
	if err := webhook.CheckURL(ctx, url, allowPrivate); err != nil {
		return err
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		return err
	}
	var raw [8]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return err
	}
	ep := host.Endpoint{ID: "ep_" + hex.EncodeToString(raw[:]), URL: url, Events: slices.Compact(slices.Sorted(slices.Values(events))), Secret: secret, Created: time.Now()}
	if err := st.AddEndpoint(ctx, ep); err != nil {
		return fmt.Errorf("store endpoint: %w", err)
	}
	_, err = fmt.Fprintf(out, "id:     %s\nsecret: %s\n", ep.ID, ep.Secret)
	return err
}

func listEndpoints(ctx context.Context, st host.WebhookAdmin, out io.Writer) error {
	eps, err := st.Endpoints(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tURL\tEVENTS\tSTATE\tCREATED")
	for _, ep := range eps {
		state := "active"
		if ep.Disabled {
			state = "disabled (" + ep.Reason + ")"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", ep.ID, ep.URL, strings.Join(ep.Events, " "), state, ep.Created.UTC().Format(time.RFC3339))
	}
	return w.Flush()
}

func listDeliveries(ctx context.Context, st host.WebhookAdmin, out io.Writer, failed bool, limit int) error {
	ds, err := st.Deliveries(ctx, failed, max(limit, 1))
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tEVENT\tENDPOINT\tSTATE\tATTEMPTS\tLAST STATUS\tNEXT TRY")
	for _, d := range ds {
		status := "-"
		if d.LastStatus != 0 {
			status = strconv.Itoa(d.LastStatus)
		} else if d.LastError != "" {
			status = d.LastError
		}
		nextTry := "-"
		if d.State == host.DeliveryPending {
			nextTry = d.NextTry.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", d.ID, d.Event.Type, d.Endpoint, d.State, d.Attempts, status, nextTry)
	}
	return w.Flush()
}

// webhookServeFlags are serve's webhook delivery flags.
func webhookServeFlags() []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "webhook-timeout", Value: 10 * time.Second, Usage: "deadline of one webhook POST", Sources: env("WEBHOOK_TIMEOUT")},
		&cli.DurationFlag{Name: "webhook-backoff", Value: 5 * time.Second, Usage: "wait before the first webhook retry; doubled for each further one, with jitter", Sources: env("WEBHOOK_BACKOFF")},
		&cli.IntFlag{Name: "webhook-max-attempts", Value: 8, Usage: "attempts per webhook delivery before it is failed and kept for `webhook replay`", Sources: env("WEBHOOK_MAX_ATTEMPTS")},
		&cli.BoolFlag{Name: "webhook-allow-private", Usage: "deliver webhooks to loopback, private, link-local and metadata addresses too", Sources: env("WEBHOOK_ALLOW_PRIVATE")},
		&cli.StringFlag{Name: "webhook-consumer", Usage: "this gateway's name in the outbox consumer group; a gateway restarted under the same name resumes its unacknowledged events at once (default: hostname-pid)", Sources: env("WEBHOOK_CONSUMER")},
		&cli.DurationFlag{Name: "webhook-claim-idle", Value: time.Minute, Usage: "how long events given to a gateway may stay unacknowledged before another gateway takes them over", Sources: env("WEBHOOK_CLAIM_IDLE")},
	}
}

// webhookOptions reads serve's webhook flags.
func webhookOptions(cmd *cli.Command) webhook.Options {
	return webhook.Options{
		Timeout:      cmd.Duration("webhook-timeout"),
		Backoff:      cmd.Duration("webhook-backoff"),
		MaxAttempts:  int(cmd.Int("webhook-max-attempts")),
		AllowPrivate: cmd.Bool("webhook-allow-private"),
		Consumer:     cmd.String("webhook-consumer"),
		ClaimIdle:    cmd.Duration("webhook-claim-idle"),
	}
}

// startWebhooks starts delivering once the store answers; a failure is
// logged and tried again by the caller's next attempt.
func (m *Main) startWebhooks(ctx context.Context) error {
	if m.deliverer != nil {
		return nil
	}
	opts := m.Webhooks
	opts.Logger = m.Logger
	if m.webhookMetrics == nil { // a failed start is tried again: register once
		m.webhookMetrics = m.metrics.Webhooks(m.store.WebhookBacklog)
	}
	opts.Observer = m.webhookMetrics
	opts.Tracer = m.tracer()
	d := webhook.New(m.store, opts)
	if err := d.Start(ctx); err != nil {
		return err
	}
	m.deliverer = d
	m.Logger.Info("delivering webhooks", "consumer", d.Consumer(), "allow_private", opts.AllowPrivate)
	return nil
}
