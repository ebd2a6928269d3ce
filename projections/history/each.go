package history

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
		err := h.store.ScanPrefix(append(dayPrefix(day), 'r'), func(_, value []byte) (bool, error) {
			d, err := decodeRecord(value)
			if err != nil {
				return false, err
			}
			return true, fn(d)
		})
		if err != nil {
			return err
		}
	}
	return nil
}
