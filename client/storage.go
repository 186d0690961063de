package client

import (
	"errors"
	"fmt"
)

// JetStream API error codes that mean the server has no room for the
// write (nats-server errors.json): the account's or server's storage
// limit (10047, storage resources exceeded; 10023, insufficient
// resources, which a file store whose max_file is reached answers).
const (
	errCodeInsufficientResources    = 10023
	errCodeStorageResourcesExceeded = 10047
)

// ErrStorageFull is wrapped by an append the server refused for lack of
// storage: nothing of it was stored (the server answered with the refusal,
// so the outcome is known). It is not retried within the call; retry
// after space is freed or limits raised. A server whose disk is full and
// which does not answer at all (nats-server's file store stops answering
// after a "no space left on device" write error) surfaces as a timeout
// instead; agentd tells that case apart from its embedded server's state.
var ErrStorageFull = errors.New("client: the server has no storage left for the append")

// storageFull wraps the server's refusal in ErrStorageFull.
func storageFull(tenant, thread string, cause error) error {
	return fmt.Errorf("%w (%s/%s): %w", ErrStorageFull, tenant, thread, cause)
}
