// Package operator keeps an operator directory: the files of operator
// mode (agentd operator), where tenants are NATS accounts whose JWTs an
// operator signs and the servers' full resolver keeps.
//
// A directory holds the operator and its signing key, the system account
// and a user of it, convlog's account CONVLOG and agentd's user of it,
// the key that signs tenant users, the nats-server configuration fragment
// and, under accounts/, each tenant's account JWT as last pushed. Secrets
// (seeds and creds) are written with mode 0600, the rest with 0644, each
// through a temporary file and a rename. The operator JWT is written last:
// its presence says the directory is complete ([Init]).
//
// The package works on files and on the tenant registry; the caller owns
// the NATS connections: a [Pusher] sends an account JWT to the resolver
// (tenancy.PushAccountJWT on a connection as the system account user).
// A directory is not safe for concurrent use, by goroutines or by
// processes: run one operator command at a time on it.
package operator
