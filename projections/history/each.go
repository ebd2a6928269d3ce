package history

import "github.com/hookline/hookline/projections"

// Each calls fn with every delivery record in the store, newest day first
// and, within a day, newest planned first, whatever its partition (the
// caller filters); fn returning an error stops it with that error. Records
// the runner changes meanwhile may or may not be seen. Reconciliation
// compares the history with the log through it.
func (h *History) Each(fn func(Delivery) error) error {
	newest, oldest, ok, err := h.days()
	if err != nil || !ok {
		return err
	}
	for day := newest; day >= oldest; day-- {
		lower := append(dayPrefix(day), 'r')
		it, err := h.store.NewIter(lower, projections.PrefixEnd(lower))
		if err != nil {
			return err
		}
		for ok := it.First(); ok; ok = it.Next() {
			v, verr := it.Value()
			if verr != nil {
				err = verr
				break
			}
			d, derr := decodeRecord(v)
			if derr != nil {
				err = derr
				break
			}
			if err = fn(d); err != nil {
				break
			}
		}
		if cerr := it.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}
