package events

import "reflect"

// TextValid and TextError expose the fast and the path-naming walks of
// payload text checks to the external tests, which check they agree.
func TextValid(p Payload) bool { return textValid(reflect.ValueOf(p)) }

// TextError is validateText on p (nil when every string is valid).
func TextError(p Payload) error {
	return validateText(reflect.ValueOf(p), "", func(field, format string, args ...any) error {
		return &ValidationError{Field: field, Reason: format}
	})
}

// CanonicalUUID exposes canonicalUUID.
var CanonicalUUID = canonicalUUID

// UnmarshalReflect is Unmarshal with the reflection decoder only.
var UnmarshalReflect = unmarshalReflect

// DecodeFast is the hand-written decoder alone, on unchecked bytes (as
// Unmarshal runs it): ok is false where Unmarshal falls back to checkWire
// and the reflection decoder.
func DecodeFast(b []byte) (Event, bool) { return decodeFast(b, false) }

// MarshalReflect is Marshal with the payload encoded by the reflection
// encoder alone (the envelope as wireMsgpack), the reference the payload
// encoders are checked against.
func MarshalReflect(e Event) ([]byte, error) {
	var body any = e.Payload
	if f, ok := e.Payload.(Forked); ok {
		body = forkedWireOf(f)
	}
	pb, err := encodeMsgpack(body)
	if err != nil {
		return nil, err
	}
	return encodeMsgpack(wireMsgpack{wire: e.wire(), Payload: pb})
}

// TypedTextValid exposes typedTextValid.
var TypedTextValid = typedTextValid

// ValidatePayload is validatePayload with the default limits.
func ValidatePayload(p Payload) error {
	return validatePayload(p, DefaultLimits(), func(field, format string, args ...any) error {
		return &ValidationError{Field: field, Reason: format}
	})
}
