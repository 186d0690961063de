package client

import (
	"fmt"
)

// JetStream API error codes that mean the server has no room for the
// write (nats-server errors.json): the account's or server's storage
// limit (10047, storage resources exceeded; 10023, insufficient
// resources, which a file store whose max_file is reached answers;
// 10002, account resource limits exceeded, which a publish that would
// pass the account's storage limit answers, as on an embedded server
// whose disk is full).
const (
	errCodeAccountResourcesExceeded = 10002
	errCodeInsufficientResources    = 10023
	errCodeStorageResourcesExceeded = 10047
)

// storageFull wraps the server's refusal in ErrStorageFull.
func storageFull(tenant, thread string, cause error) error {
	return fmt.Errorf("%w (%s/%s): %w", ErrStorageFull, tenant, thread, cause)
}
