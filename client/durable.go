package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/convlog/convlog/events"
)

// ErrDurableStopped is returned by [Durable.Next] once the durable consume
// was stopped ([Durable.Stop], [Durable.Drain]) and every message already
// pulled was handed out.
var ErrDurableStopped = errors.New("client: durable consume stopped")

// DurableConfig describes a durable pull consumer on the event stream:
// the one way convlog's long-lived consumers (the projector, the agent
// workers, replay-run's tool runner) and applications consume the log.
//
// Delivery: each stored event on the filter is delivered to one of the
// processes that share Name (the server spreads them), at least once, and
// first deliveries come in stream order. Ack: explicit; a message not
// acked within AckWait (or nak'ed) is delivered again, to any sharer, as
// often as it takes (MaxDeliver is unlimited), so handlers must be
// idempotent. Term stops redelivery of one message.
type DurableConfig struct {
	// Name is the durable consumer's name (required): processes that use
	// the same Name share its messages. Its other settings are updated to
	// this config when it exists.
	Name string
	// Description is shown by `nats consumer info`.
	Description string
	// Tenant restricts delivery to one tenant's threads (filter
	// "<prefix>.<tenant>.*"); "" delivers every thread's events
	// ("<prefix>.*.*").
	Tenant string
	// AllSubjects delivers every message of the stream: no filter subject,
	// so the stream-level messages (the audit checkpoints, subject
	// "<prefix>.audit", at most one a second) come too, and the caller
	// must ack and skip them. The point is the server's cost: nats-server
	// 2.15 finds an unfiltered consumer's next message by reading on in
	// the message block, but for the filter "<prefix>.*.*" over a stream
	// of two subjects it matches the filter against every subject the
	// block holds, per delivery: a cost that grows with the threads
	// written to the block (projector.BenchmarkCatchUp shows it in the
	// catch-up rate). Not with Tenant. Setting or
	// clearing it updates an existing consumer's filter.
	AllSubjects bool
	// DeliverNew delivers only events stored after the consumer is first
	// created; the default delivers the whole stream from its first event.
	DeliverNew bool
	// AckWait is how long the server waits for an ack before delivering a
	// message again. Default 30 s.
	AckWait time.Duration
	// MaxAckPending bounds the messages delivered and not yet acked, across
	// every process that shares Name. Default 1,000.
	MaxAckPending int
	// PullMaxMessages is how many messages one process buffers ahead of
	// its Next calls. Default 64, at most MaxAckPending.
	PullMaxMessages int
	// PullMaxBytes, when > 0, bounds the buffer by bytes instead of
	// PullMaxMessages (nats.go's PullMaxBytes: the two exclude each
	// other). It must exceed the largest message the stream can hold
	// (the server's max payload plus headers): a message larger than a
	// pull request's max bytes is never delivered to it.
	PullMaxBytes int
	// PullExpiry is how long one pull request lives; its idle heartbeat
	// (half of it) is how soon a lost consumer leader (a NATS node gone)
	// is noticed. Default 5 s.
	PullExpiry time.Duration
	// PinnedTTL, when > 0, gives the consumer the priority policy
	// pinned_client in the priority group [PinnedGroup] (nats-server 2.11+,
	// ADR-42): the server delivers to one process at a time (the pinned
	// one, whose pull requests carry its pin id), and pins another when
	// the pinned one has made no pull request for PinnedTTL (it stopped,
	// crashed or lost its connection). Must exceed PullExpiry. Default 0:
	// every process that consumes the durable receives messages. Setting
	// or clearing it updates an existing consumer's priority policy.
	PinnedTTL time.Duration
	// Logger receives a warning for each missed heartbeat; nil discards.
	Logger *slog.Logger
}

// Durable is a started durable consume: [ConsumeDurable] created or joined
// the consumer and pulls its messages. Next may be called by one goroutine
// at a time; Stop, Drain and Delete by any, concurrently with Next.
type Durable struct {
	js     jetstream.JetStream
	stream string
	name   string
	it     jetstream.MessagesContext
	log    *slog.Logger
}

// PinnedGroup is the priority group of a durable consumer with
// DurableConfig.PinnedTTL.
const PinnedGroup = "convlog"

// ConsumeDurable creates the durable consumer cfg describes on stream (or
// updates it to cfg when it exists) and starts pulling its messages.
// subjects names the thread subjects (the stream's subject prefix).
//
// Errors: a config error (no Name, a bad Tenant, Tenant with AllSubjects), or the server's refusal
// to create the consumer (missing stream, permissions, a consumer of that
// name with settings that cannot be updated), wrapped with the consumer's
// name. It does not retry: callers that must wait for the server retry it.
func ConsumeDurable(ctx context.Context, js jetstream.JetStream, stream string, subjects events.Subjects, cfg DurableConfig) (*Durable, error) {
	if cfg.Name == "" {
		return nil, errors.New("client: durable consume: DurableConfig.Name is required")
	}
	filter := subjects.StreamSubjects()
	if cfg.AllSubjects {
		if cfg.Tenant != "" {
			return nil, fmt.Errorf("client: durable consume %s: AllSubjects and Tenant %q exclude each other", cfg.Name, cfg.Tenant)
		}
		filter = ""
	}
	if cfg.Tenant != "" {
		var err error
		if filter, err = subjects.Tenant(cfg.Tenant); err != nil {
			return nil, fmt.Errorf("client: durable consume %s: %w", cfg.Name, err)
		}
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = 30 * time.Second
	}
	if cfg.MaxAckPending <= 0 {
		cfg.MaxAckPending = 1000
	}
	if cfg.PullMaxMessages <= 0 {
		cfg.PullMaxMessages = 64
	}
	cfg.PullMaxMessages = min(cfg.PullMaxMessages, cfg.MaxAckPending)
	if cfg.PullExpiry <= 0 {
		cfg.PullExpiry = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.PinnedTTL > 0 && cfg.PinnedTTL <= cfg.PullExpiry {
		return nil, fmt.Errorf("client: durable consume %s: PinnedTTL %s must exceed PullExpiry %s (the pinned process renews its pull requests that often)", cfg.Name, cfg.PinnedTTL, cfg.PullExpiry)
	}
	deliver := jetstream.DeliverAllPolicy
	if cfg.DeliverNew {
		deliver = jetstream.DeliverNewPolicy
	}
	ccfg := jetstream.ConsumerConfig{
		Durable:       cfg.Name,
		Description:   cfg.Description,
		FilterSubject: filter,
		DeliverPolicy: deliver,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: cfg.MaxAckPending,
	}
	opts := []jetstream.PullMessagesOpt{jetstream.PullMaxMessages(cfg.PullMaxMessages), jetstream.PullExpiry(cfg.PullExpiry)}
	if cfg.PullMaxBytes > 0 {
		opts[0] = jetstream.PullMaxBytes(cfg.PullMaxBytes)
	}
	if cfg.PinnedTTL > 0 {
		ccfg.PriorityPolicy, ccfg.PriorityGroups, ccfg.PinnedTTL = jetstream.PriorityPolicyPinned, []string{PinnedGroup}, cfg.PinnedTTL
		opts = append(opts, jetstream.PullPriorityGroup(PinnedGroup))
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, ccfg)
	if err != nil {
		return nil, fmt.Errorf("client: durable consumer %s on %s: %w", cfg.Name, stream, err)
	}
	it, err := cons.Messages(opts...)
	if err != nil {
		return nil, fmt.Errorf("client: consume %s/%s: %w", stream, cfg.Name, err)
	}
	return &Durable{js: js, stream: stream, name: cfg.Name, it: it, log: cfg.Logger}, nil
}

// ConsumeDurable is [ConsumeDurable] on the client's stream and subjects.
func (c *Client) ConsumeDurable(ctx context.Context, cfg DurableConfig) (*Durable, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := c.scopedErr("durable consumer"); err != nil {
		return nil, err
	}
	if _, ok := c.cfg.Resources.PartitionIndex(); !ok && len(c.parts) > 1 {
		return nil, fmt.Errorf("client: durable consumer %s: the deployment has %d partitions: consume each one through Client.Partitions()[p].ConsumeDurable", cfg.Name, len(c.parts))
	}
	return ConsumeDurable(ctx, c.js, c.stream, c.subjects, cfg)
}

// Next returns the next message; ack it (Ack, Nak, NakWithDelay, Term)
// when done. A missed heartbeat (the consumer's leader changed, a node was
// lost) is logged and the pull goes on by itself. Errors:
// [ErrDurableStopped] after Stop or Drain once the buffered messages are
// handed out, or the error that ended the consume for good (the consumer
// was deleted, the connection closed).
func (d *Durable) Next() (jetstream.Msg, error) {
	for {
		msg, err := d.it.Next()
		switch {
		case err == nil:
			return msg, nil
		case errors.Is(err, jetstream.ErrMsgIteratorClosed):
			return nil, ErrDurableStopped
		case errors.Is(err, jetstream.ErrNoHeartbeat):
			d.log.Warn("durable consumer: missed heartbeat; pulling again", "consumer", d.name, "err", err)
			continue
		default:
			return nil, fmt.Errorf("client: consume %s/%s: %w", d.stream, d.name, err)
		}
	}
}

// Stop stops pulling at once: messages buffered and not handed out are
// not acked and come back after AckWait. Safe to call more than once.
func (d *Durable) Stop() { d.it.Stop() }

// Drain stops pulling but lets Next hand out what is buffered and what
// pull requests already in flight bring, then Next returns
// [ErrDurableStopped]. Safe to call more than once.
func (d *Durable) Drain() { d.it.Drain() }

// Delete removes the durable consumer from the server (for a consumer of
// one run, such as replay-run's); sharers of its name stop receiving.
// Errors: the server's, wrapped with the consumer's name.
func (d *Durable) Delete(ctx context.Context) error {
	if err := d.js.DeleteConsumer(ctx, d.stream, d.name); err != nil {
		return fmt.Errorf("client: delete durable consumer %s on %s: %w", d.name, d.stream, err)
	}
	return nil
}
