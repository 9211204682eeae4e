package pdf

// The key derivation and password padding of the standard security handler,
// for the tests that build encrypted PDFs.
var (
	LegacyKey   = legacyKey
	PasswordPad = passwordPad
)
