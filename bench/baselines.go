package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// pgTable is the Postgres baseline's table: one row per event, the same
// msgpack bytes as the stream message. The primary key (thread_id, seq)
// is what gives Postgres the optimistic concurrency convlog has (a writer
// inserts seq = the version it read + 1; a concurrent writer of the same
// seq gets a unique violation); reads use the (thread_id, created_at)
// index.
const pgTable = "convlog_bench_events"

var pgSchema = []string{
	"DROP TABLE IF EXISTS " + pgTable,
	"CREATE TABLE " + pgTable + ` (
		thread_id  text        NOT NULL,
		seq        bigint      NOT NULL,
		created_at timestamptz NOT NULL DEFAULT now(),
		body       bytea       NOT NULL,
		PRIMARY KEY (thread_id, seq))`,
	"CREATE INDEX ON " + pgTable + " (thread_id, created_at)",
}

const (
	pgInsert = "INSERT INTO " + pgTable + " (thread_id, seq, created_at, body) VALUES ($1, $2, now(), $3)"
	pgSelect = "SELECT seq, created_at, body FROM " + pgTable + " WHERE thread_id = $1 ORDER BY created_at"
)

// Baselines are the other systems, each nil when not configured (the
// tables then show "–").
type Baselines struct {
	// PG commits with synchronous_commit on (the default: the commit
	// waits for the WAL flush); PGAsync with synchronous_commit off, the
	// durability closest to JetStream's default (see BENCHMARKS.md).
	PG, PGAsync *pgxpool.Pool
	// Redis is a server with appendonly yes, appendfsync everysec.
	Redis *redis.Client

	PGVersion, RedisVersion, RedisFsync string
}

// ConnectBaselines connects to Postgres (a DSN) and Redis (host:port);
// an empty address skips that system. It (re)creates the Postgres table
// and flushes the Redis database.
func ConnectBaselines(ctx context.Context, pgDSN, redisAddr string, conns int) (*Baselines, error) {
	b := &Baselines{}
	if pgDSN != "" {
		for _, sync := range []string{"on", "off"} {
			cfg, err := pgxpool.ParseConfig(pgDSN)
			if err != nil {
				return nil, fmt.Errorf("postgres DSN: %w", err)
			}
			cfg.MaxConns = int32(conns)
			cfg.MinConns = int32(conns)
			cfg.ConnConfig.RuntimeParams["synchronous_commit"] = sync
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				b.Close()
				return nil, fmt.Errorf("postgres: %w", err)
			}
			if sync == "on" {
				b.PG = pool
			} else {
				b.PGAsync = pool
			}
		}
		for _, q := range pgSchema {
			if _, err := b.PG.Exec(ctx, q); err != nil {
				b.Close()
				return nil, fmt.Errorf("postgres schema: %w", err)
			}
		}
		var v, sc, fsync string
		if err := b.PG.QueryRow(ctx, "SELECT current_setting('server_version'), current_setting('synchronous_commit'), current_setting('fsync')").Scan(&v, &sc, &fsync); err != nil {
			b.Close()
			return nil, fmt.Errorf("postgres: %w", err)
		}
		if sc != "on" || fsync != "on" {
			b.Close()
			return nil, fmt.Errorf("postgres: synchronous_commit=%s fsync=%s; the baseline needs both on", sc, fsync)
		}
		b.PGVersion = v
	}
	if redisAddr != "" {
		b.Redis = redis.NewClient(&redis.Options{Addr: redisAddr, PoolSize: conns, MinIdleConns: conns})
		info, err := b.Redis.Info(ctx, "server").Result()
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("redis %s: %w", redisAddr, err)
		}
		b.RedisVersion = infoField(info, "redis_version")
		cfg, err := b.Redis.ConfigGet(ctx, "append*").Result()
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("redis: %w", err)
		}
		if cfg["appendonly"] != "yes" {
			b.Close()
			return nil, errors.New("redis: appendonly is not yes; start it with --appendonly yes --appendfsync everysec")
		}
		b.RedisFsync = cfg["appendfsync"]
		if err := b.Redis.FlushDB(ctx).Err(); err != nil {
			b.Close()
			return nil, err
		}
	}
	return b, nil
}

// infoField returns field of a Redis INFO answer.
func infoField(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// Close closes every connection.
func (b *Baselines) Close() {
	if b.PG != nil {
		b.PG.Close()
	}
	if b.PGAsync != nil {
		b.PGAsync.Close()
	}
	if b.Redis != nil {
		_ = b.Redis.Close()
	}
}

// pgRow is one row of a Postgres read.
type pgRow struct {
	seq  int64
	at   time.Time
	body []byte
}

// pgRead reads a thread's rows in order.
func pgRead(ctx context.Context, pool *pgxpool.Pool, thread string) ([]pgRow, error) {
	rows, err := pool.Query(ctx, pgSelect, thread)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (pgRow, error) {
		var x pgRow
		err := r.Scan(&x.seq, &x.at, &x.body)
		return x, err
	})
}

// pgLoad bulk-loads rows of thread (COPY).
func pgLoad(ctx context.Context, pool *pgxpool.Pool, thread string, rows []pgRow) error {
	_, err := pool.CopyFrom(ctx, pgx.Identifier{pgTable}, []string{"thread_id", "seq", "created_at", "body"},
		pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
			return []any{thread, rows[i].seq, rows[i].at, rows[i].body}, nil
		}))
	return err
}

// redisKey is the Redis list of a thread.
func redisKey(thread string) string { return "thread:" + thread }
