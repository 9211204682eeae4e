package metal

// Owned is the Metal backend together with the device it runs on: its
// Close closes both (New leaves the device to its caller).
type Owned struct {
	*Backend
}

// Close closes the backend, then its device.
func (o *Owned) Close() error {
	err := o.Backend.Close()
	if e := o.dev.Close(); err == nil {
		err = e
	}
	return err
}

// NewDefault returns the Metal backend on this system's default GPU, which
// it owns (Close closes both), and a description of the device for
// Diagnostics ("Apple M2 Pro, residency set"). It fails on a system without
// Metal: everywhere but macOS with an error wrapping mtl.ErrUnsupported
// ("the Metal backend needs macOS"), on a Mac without a usable GPU with one
// wrapping mtl.ErrNoDevice. The MSL emulator is for tests and is never
// opened here.
func NewDefault() (*Owned, string, error) {
	dev, about, err := openDefault()
	if err != nil {
		return nil, "", err
	}
	b, err := New(dev)
	if err != nil {
		dev.Close()
		return nil, "", err
	}
	return &Owned{Backend: b}, about, nil
}
