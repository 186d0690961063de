package httpapi

import (
	"crypto/ed25519"
	"net/http"

	"github.com/convlog/convlog/audit"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/internal/provision"
)

// DefaultMaxAudits is Config.MaxAudits's default.
const DefaultMaxAudits = 2

// auditKeyBody is GET /v1/audit/key.
type auditKeyBody struct {
	Algorithm string `json:"algorithm"`
	PublicKey string `json:"public_key"`
	PEM       string `json:"pem"`
	Subject   string `json:"checkpoint_subject"`
}

func (s *Server) auditOff() *Problem {
	return newProblem(http.StatusNotFound, "audit-off", "Audit checkpoints are off",
		"this server signs no checkpoints (agentd serve --audit=false, or no signing key): there is nothing to verify against")
}

// getAuditKey publishes the checkpoint signing key's public half.
func (s *Server) getAuditKey(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.AuditKey == nil {
		return s.auditOff()
	}
	return writeJSON(w, http.StatusOK, auditKeyBody{Algorithm: "Ed25519", PublicKey: audit.PublicKeyString(s.cfg.AuditKey),
		PEM: audit.PublicKeyPEM(s.cfg.AuditKey), Subject: audit.CheckpointSubject(s.c.Subjects().Prefix)})
}

// verifyTenant is GET /v1/audit/verify: every thread of the caller's
// tenant.
func (s *Server) verifyTenant(w http.ResponseWriter, r *http.Request) error {
	return s.verify(w, r, audit.Scope{Tenant: tenantOf(r.Context())})
}

// verifyThread is GET /v1/threads/{id}/audit: one thread.
func (s *Server) verifyThread(w http.ResponseWriter, r *http.Request) error {
	id, p := threadID(r)
	if p != nil {
		return p
	}
	return s.verify(w, r, audit.Scope{Tenant: tenantOf(r.Context()), Thread: id})
}

func (s *Server) verify(w http.ResponseWriter, r *http.Request, scope audit.Scope) error {
	if s.cfg.AuditKey == nil {
		return s.auditOff()
	}
	select {
	case s.audits <- struct{}{}:
		defer func() { <-s.audits }()
	default:
		return newProblem(http.StatusTooManyRequests, "audit-busy", "Too many verifications",
			"the server runs as many verifications as it allows at once (agentd --http-max-audits); retry after a second").header("Retry-After", "1")
	}
	q := r.URL.Query()
	if p := onlyParams(q, "anchor_seq", "anchor_hash"); p != nil {
		return p
	}
	opts := audit.VerifyOptions{Trusted: []ed25519.PublicKey{s.cfg.AuditKey}}
	seq, p := querySeq(q, "anchor_seq")
	if p != nil {
		return p
	}
	if (seq == 0) != (q.Get("anchor_hash") == "") {
		return badRequest("bad-query", "anchor_seq and anchor_hash go together: the last_checkpoint's msg_seq and hash of a report you trusted").field("anchor_hash")
	}
	if seq != 0 {
		if _, err := audit.ParseHash(q.Get("anchor_hash")); err != nil {
			return badRequest("bad-query", err.Error()).field("anchor_hash")
		}
		opts.Anchor = &audit.Anchor{MsgSeq: seq, Hash: q.Get("anchor_hash")}
	}
	rep, err := audit.VerifyPartitions(r.Context(), s.c.JetStream(), scope, opts, AuditPartitions(s.c, scope))
	if err != nil {
		return err
	}
	if scope.Thread != "" && rep.Threads == 0 {
		return notFound(scope.Thread)
	}
	return writeJSON(w, http.StatusOK, rep)
}

// AuditPartitions names the stream, subject prefix and audit heads bucket
// of each partition of c's deployment that scope covers, in partition
// order: every partition, or the thread's own for a scope of one thread.
// The heads bucket keeps a checkpointer's position, so partition p's is
// audit.DefaultHeadsBucket with provision.PartitionSuffix(p). agentd
// serve's checkpointers (Scope{}) and every verification use these.
func AuditPartitions(c *client.Client, scope audit.Scope) []audit.Partition {
	parts := c.Partitions()
	if scope.Thread != "" {
		parts = []*client.Client{c.For(scope.Tenant, scope.Thread)}
	}
	var out []audit.Partition
	for _, pc := range parts {
		rc := pc.Config().Resources
		p, _ := rc.PartitionIndex()
		out = append(out, audit.Partition{Stream: rc.Stream, SubjectPrefix: rc.SubjectPrefix, HeadsBucket: audit.DefaultHeadsBucket + provision.PartitionSuffix(p)})
	}
	return out
}
