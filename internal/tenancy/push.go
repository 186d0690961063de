package tenancy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// The system account's subjects a push uses (nats-server's events.go):
// every server answers a ping with its statistics, which name its routes;
// every server with a full resolver answers a claims update with its own
// result.
const (
	serverPingSubject   = "$SYS.REQ.SERVER.PING"
	claimsUpdateSubject = "$SYS.REQ.CLAIMS.UPDATE"
)

// ClaimsUpdateError is a resolver's refusal of an account JWT
// ([PushAccountJWT]): a server's answer to $SYS.REQ.CLAIMS.UPDATE.
// Not retryable: the JWT does not decode or validate, or the server
// could not store it. (A resolver stores a JWT of another operator's too;
// the server trusts it only when its issuer is one of its operator's
// keys.)
type ClaimsUpdateError struct {
	// Server is the name of the server that refused (its ID when it has
	// no name).
	Server      string `json:"-"`
	Account     string `json:"account"`
	Code        int    `json:"code"`
	Description string `json:"description"`
}

func (e *ClaimsUpdateError) Error() string {
	return fmt.Sprintf("tenancy: server %s refused account %s: %d %s", e.Server, e.Account, e.Code, e.Description)
}

// UnconfirmedPushError is a push that some servers did not confirm
// before ctx ended ([PushAccountJWT]): they answered the ping but not the
// account update, so they may still hold the account's previous JWT until
// their resolver syncs with the others. Retryable: a push is idempotent.
type UnconfirmedPushError struct {
	// Servers are the names of the servers that never confirmed, sorted.
	Servers []string
	// Confirmed counts the servers that stored the JWT.
	Confirmed int
	// Err is ctx's error.
	Err error
}

func (e *UnconfirmedPushError) Error() string {
	return fmt.Sprintf("tenancy: push account JWT: %d of %d servers confirmed; no confirmation from %s: %v",
		e.Confirmed, e.Confirmed+len(e.Servers), strings.Join(e.Servers, ", "), e.Err)
}

func (e *UnconfirmedPushError) Unwrap() error { return e.Err }

// pushTimeout bounds a push when the caller's ctx has no deadline;
// pushAttempt bounds each round of requests of it.
const (
	pushTimeout = 30 * time.Second
	pushAttempt = 3 * time.Second
	// pingQuiet is how long the ping waits for one more answer once every
	// server that routes name has answered.
	pingQuiet = 250 * time.Millisecond
)

// PushAccountJWT sends accountJWT to the full resolver of every server
// of the cluster nc reaches; nc must be a user of the system account. It
// counts the servers with a ping ($SYS.REQ.SERVER.PING: each server that
// answers, and the servers its routes name), then publishes the JWT to
// $SYS.REQ.CLAIMS.UPDATE, which every server with a full resolver stores
// and answers, and returns when each counted server confirmed: then each
// applies the account (a revoked user is disconnected and refused on
// every node). Servers that did not answer are asked again every 3 s
// until ctx ends (30 s when ctx has no deadline): a push is idempotent.
// It is safe for concurrent use. Errors: a *ClaimsUpdateError for each
// server that refused the JWT (joined with errors.Join; match with
// errors.As), not retried; nats.ErrNoResponders when no server answers
// (nc not a system account user, or no full resolver); an
// *UnconfirmedPushError, which wraps ctx's error, naming the servers that
// did not confirm in time (the others stored it).
func PushAccountJWT(ctx context.Context, nc *nats.Conn, accountJWT string) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, pushTimeout)
		defer cancel()
	}
	servers, err := pingServers(ctx, nc)
	if err != nil {
		return err
	}
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return fmt.Errorf("tenancy: push account JWT: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	confirmed := map[string]bool{}
	for {
		refused, err := pushRound(ctx, nc, sub, inbox, []byte(accountJWT), servers, confirmed)
		if err != nil {
			return err
		}
		if len(refused) > 0 {
			errs := make([]error, 0, len(refused))
			for _, name := range slices.Sorted(maps.Keys(refused)) {
				errs = append(errs, refused[name])
			}
			return errors.Join(errs...)
		}
		missing := unconfirmed(servers, confirmed)
		if len(missing) == 0 {
			return nil
		}
		if ctx.Err() != nil {
			return &UnconfirmedPushError{Servers: missing, Confirmed: len(confirmed), Err: ctx.Err()}
		}
	}
}

// pushRound publishes the JWT once and reads answers until every server
// in servers confirmed or refused, pushAttempt passed or ctx ended. It
// records confirmations in confirmed and adds servers that answer
// without having answered the ping to servers.
func pushRound(ctx context.Context, nc *nats.Conn, sub *nats.Subscription, inbox string, jwt []byte, servers, confirmed map[string]bool) (map[string]*ClaimsUpdateError, error) {
	if err := nc.PublishRequest(claimsUpdateSubject, inbox, jwt); err != nil {
		return nil, fmt.Errorf("tenancy: push account JWT: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, pushAttempt)
	defer cancel()
	refused := map[string]*ClaimsUpdateError{}
	for len(unconfirmed(servers, confirmed)) > len(refused) {
		msg, err := sub.NextMsgWithContext(rctx)
		if errors.Is(err, nats.ErrNoResponders) {
			return nil, fmt.Errorf("tenancy: push account JWT: %w (connect as a system account user; the servers need resolver type full)", err)
		}
		if err != nil {
			if rctx.Err() != nil {
				break
			}
			return nil, fmt.Errorf("tenancy: push account JWT: %w", err)
		}
		a, err := decodeAnswer(msg.Data)
		if err != nil {
			return nil, err
		}
		servers[a.name()] = true
		switch {
		case confirmed[a.name()]:
			// A later answer of a server that stored the JWT already.
		case a.Error != nil:
			a.Error.Server = a.name()
			refused[a.name()] = a.Error
		case a.Data != nil:
			confirmed[a.name()] = true
		default:
			return nil, fmt.Errorf("tenancy: push account JWT: answer %q has neither data nor error", msg.Data)
		}
	}
	return refused, nil
}

// pingServers returns the names of the servers that answer the system
// account's ping and of the servers their routes name: it reads answers
// until every server a route names has answered and pingQuiet passed
// without another answer (servers of other clusters, which routes do not
// name), or pushAttempt passed after at least one answer. A server a
// route names that stays silent is counted all the same: it is connected,
// so it must confirm the update. With no answer it pings again until ctx
// ends.
func pingServers(ctx context.Context, nc *nats.Conn) (map[string]bool, error) {
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("tenancy: push account JWT: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	answered, named := map[string]bool{}, map[string]bool{}
	for len(answered) == 0 {
		if err := pingRound(ctx, nc, sub, inbox, answered, named); err != nil {
			return nil, err
		}
		if len(answered) == 0 && ctx.Err() != nil {
			return nil, fmt.Errorf("tenancy: push account JWT: no server answered the ping: %w", ctx.Err())
		}
	}
	return named, nil
}

// pingRound pings once and records who answers in answered, and they
// and the servers their routes name in named, until pingServers' rule
// says every answer is in.
func pingRound(ctx context.Context, nc *nats.Conn, sub *nats.Subscription, inbox string, answered, named map[string]bool) error {
	if err := nc.PublishRequest(serverPingSubject, inbox, nil); err != nil {
		return fmt.Errorf("tenancy: push account JWT: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, pushAttempt)
	defer cancel()
	for {
		wait, cancelWait := rctx, context.CancelFunc(func() {})
		if len(answered) > 0 && len(unconfirmed(named, answered)) == 0 {
			wait, cancelWait = context.WithTimeout(rctx, pingQuiet)
		}
		msg, err := sub.NextMsgWithContext(wait)
		quiet := wait.Err() != nil
		cancelWait()
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			return fmt.Errorf("tenancy: push account JWT: %w (connect as a system account user)", err)
		case err != nil && quiet:
			return nil
		case err != nil:
			return fmt.Errorf("tenancy: push account JWT: %w", err)
		}
		a, err := decodeAnswer(msg.Data)
		if err != nil {
			return err
		}
		answered[a.name()], named[a.name()] = true, true
		for _, r := range a.Statsz.Routes {
			if r.Name != "" {
				named[r.Name] = true
			}
		}
	}
}

// unconfirmed returns the servers not in confirmed, sorted.
func unconfirmed(servers, confirmed map[string]bool) []string {
	var out []string
	for s := range servers {
		if !confirmed[s] {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// serverAnswer is a server's answer to a ping (Server and Statsz) or to
// a claims update (Server and Data or Error): nats-server's
// ServerStatsMsg and ServerAPIClaimUpdateResponse.
type serverAnswer struct {
	Server struct {
		Name string `json:"name"`
		ID   string `json:"id"`
	} `json:"server"`
	Statsz struct {
		Routes []struct {
			Name string `json:"name"`
		} `json:"routes"`
	} `json:"statsz"`
	Data *struct {
		Account string `json:"account"`
		Code    int    `json:"code"`
	} `json:"data"`
	Error *ClaimsUpdateError `json:"error"`
}

// name is the answering server's name, its ID when it has none.
func (a *serverAnswer) name() string {
	if a.Server.Name != "" {
		return a.Server.Name
	}
	return a.Server.ID
}

// decodeAnswer decodes a server's answer.
func decodeAnswer(data []byte) (*serverAnswer, error) {
	var a serverAnswer
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("tenancy: push account JWT: answer %q: %w", data, err)
	}
	return &a, nil
}
