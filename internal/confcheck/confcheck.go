// Package confcheck holds the checks that the Validate methods of
// Hookline's configs share, so that each config lists its fields instead
// of repeating the same comparison and message for every one.
package confcheck

import (
	"errors"
	"fmt"
	"time"
)

// NotNegative returns an error naming field when v is negative, and nil
// otherwise. Zero passes: in these configs it stands for the default.
func NotNegative[T int | int64 | time.Duration](field string, v T) error {
	if v < 0 {
		return fmt.Errorf("%s %v is negative", field, v)
	}
	return nil
}

// All joins the errors that are not nil under the name of the config they
// came from, so that the caller learns which config to fix; it returns nil
// when every error is nil.
func All(config string, errs ...error) error {
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s: %w", config, err)
	}
	return nil
}
