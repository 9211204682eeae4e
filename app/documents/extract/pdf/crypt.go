package pdf

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/md5"
	"crypto/rc4"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"

	"nibble/app/documents"
)

// pdfCrypt decrypts a PDF protected by the standard security handler with
// an empty user password: the common "permissions only" protection, which
// any viewer opens without asking. A PDF that needs a real password gives
// ErrEncrypted.
type pdfCrypt struct {
	key      []byte
	strMeth  string // "RC4", "AESV2", "AESV3" or "None"
	stmMeth  string
	revision int64
}

// passwordPad is the padding string of the PDF standard security handler.
var passwordPad = []byte{
	0x28, 0xBF, 0x4E, 0x5E, 0x4E, 0x75, 0x8A, 0x41, 0x64, 0x00, 0x4E, 0x56, 0xFF, 0xFA, 0x01, 0x08,
	0x2E, 0x2E, 0x00, 0xB6, 0xD0, 0x68, 0x3E, 0x80, 0x2F, 0x0C, 0xA9, 0xFE, 0x64, 0x53, 0x69, 0x7A,
}

func newPDFCrypt(f *pdfFile, encV any) (*pdfCrypt, error) {
	enc := f.dict(encV)
	if enc == nil {
		return nil, fmt.Errorf("%w: the PDF is encrypted and its encryption dictionary is missing", documents.ErrDamaged)
	}
	if filter := asName(enc["Filter"]); filter != "Standard" {
		return nil, fmt.Errorf("%w: the PDF is encrypted with the %q security handler (certificates or DRM), which Nibble cannot open", documents.ErrEncrypted, filter)
	}
	v, _ := asInt(f.get(enc, "V"))
	rev, _ := asInt(f.get(enc, "R"))
	o := []byte(stringOf(f.get(enc, "O")))
	u := []byte(stringOf(f.get(enc, "U")))
	p, _ := asInt(f.get(enc, "P"))
	c := &pdfCrypt{revision: rev, strMeth: "RC4", stmMeth: "RC4"}

	if v == 4 || v == 5 {
		c.stmMeth = f.cryptMethod(enc, asName(f.get(enc, "StmF")))
		c.strMeth = f.cryptMethod(enc, asName(f.get(enc, "StrF")))
	}
	var err error
	switch {
	case rev >= 2 && rev <= 4:
		if len(o) < 32 || len(u) < 32 {
			return nil, fmt.Errorf("%w: the PDF's encryption dictionary is malformed", documents.ErrDamaged)
		}
		length := int64(40)
		if v >= 2 {
			if n, ok := asInt(f.get(enc, "Length")); ok {
				length = n
			} else {
				length = 128
			}
		}
		if rev == 2 {
			length = 40
		}
		if length < 40 || length > 128 || length%8 != 0 {
			return nil, fmt.Errorf("%w: the PDF's encryption key length %d is invalid", documents.ErrDamaged, length)
		}
		encryptMetadata := true
		if b, ok := f.get(enc, "EncryptMetadata").(bool); ok {
			encryptMetadata = b
		}
		var id0 []byte
		if ids := f.array(f.trailer["ID"]); len(ids) > 0 {
			id0 = []byte(stringOf(ids[0]))
		}
		c.key = legacyKey(nil, o, uint32(p), id0, rev, int(length/8), encryptMetadata)
		if !legacyUserOK(c.key, u, id0, rev) {
			return nil, encryptedErr()
		}
	case rev == 5 || rev == 6:
		if len(u) < 48 {
			return nil, fmt.Errorf("%w: the PDF's encryption dictionary is malformed", documents.ErrDamaged)
		}
		ue := []byte(stringOf(f.get(enc, "UE")))
		if len(ue) < 32 {
			return nil, fmt.Errorf("%w: the PDF's encryption dictionary is malformed", documents.ErrDamaged)
		}
		if !bytes.Equal(aes256Hash(nil, u[32:40], nil, rev), u[:32]) {
			return nil, encryptedErr()
		}
		k := aes256Hash(nil, u[40:48], nil, rev)
		c.key, err = aesCBCDecryptNoPad(k, make([]byte, 16), ue[:32])
		if err != nil {
			return nil, fmt.Errorf("%w: the PDF's encryption key cannot be decrypted: %v", documents.ErrDamaged, err)
		}
	default:
		return nil, fmt.Errorf("%w: the PDF uses encryption revision %d, which Nibble cannot open", documents.ErrEncrypted, rev)
	}
	return c, nil
}

func encryptedErr() error {
	return fmt.Errorf("%w: the PDF needs a password to open; open it in Preview, then File → Export as PDF without a password, and attach that copy", documents.ErrEncrypted)
}

func stringOf(v any) string {
	s, _ := v.(pdfString)
	return string(s)
}

// cryptMethod reads the method (/CFM) of a named crypt filter.
func (f *pdfFile) cryptMethod(enc pdfDict, name string) string {
	if name == "" || name == "Identity" {
		if name == "Identity" {
			return "None"
		}
		return "RC4"
	}
	cf := f.dict(f.get(enc, "CF"))
	filter := f.dict(dictGet(cf, name))
	switch asName(f.get(filter, "CFM")) {
	case "AESV2":
		return "AESV2"
	case "AESV3":
		return "AESV3"
	case "None":
		return "None"
	}
	return "RC4"
}

// legacyKey is algorithm 2 of the standard security handler (revisions
// 2 to 4).
func legacyKey(password, o []byte, p uint32, id0 []byte, rev int64, n int, encryptMetadata bool) []byte {
	h := md5.New()
	h.Write(padPassword(password))
	h.Write(o[:32])
	h.Write([]byte{byte(p), byte(p >> 8), byte(p >> 16), byte(p >> 24)})
	h.Write(id0)
	if rev >= 4 && !encryptMetadata {
		h.Write([]byte{0xff, 0xff, 0xff, 0xff})
	}
	key := h.Sum(nil)
	if rev >= 3 {
		for i := 0; i < 50; i++ {
			sum := md5.Sum(key[:n])
			key = sum[:]
		}
	}
	return key[:n]
}

func padPassword(pw []byte) []byte {
	out := make([]byte, 32)
	n := copy(out, pw)
	copy(out[n:], passwordPad)
	return out
}

// legacyUserOK checks key against /U (algorithms 4 and 5).
func legacyUserOK(key, u, id0 []byte, rev int64) bool {
	if rev == 2 {
		out := make([]byte, 32)
		rc, err := rc4.NewCipher(key)
		if err != nil {
			return false
		}
		rc.XORKeyStream(out, passwordPad)
		return bytes.Equal(out, u[:32])
	}
	h := md5.New()
	h.Write(passwordPad)
	h.Write(id0)
	out := h.Sum(nil)
	k := make([]byte, len(key))
	for i := 0; i < 20; i++ {
		for j := range key {
			k[j] = key[j] ^ byte(i)
		}
		rc, err := rc4.NewCipher(k)
		if err != nil {
			return false
		}
		rc.XORKeyStream(out, out)
	}
	return bytes.Equal(out[:16], u[:16])
}

// aes256Hash is the password hash of revisions 5 (plain SHA-256) and 6
// (algorithm 2.B of ISO 32000-2).
func aes256Hash(password, salt, udata []byte, rev int64) []byte {
	h := sha256.New()
	h.Write(password)
	h.Write(salt)
	h.Write(udata)
	k := h.Sum(nil)
	if rev == 5 {
		return k
	}
	for round := 0; ; round++ {
		k1 := make([]byte, 0, 64*(len(password)+len(k)+len(udata)))
		for i := 0; i < 64; i++ {
			k1 = append(k1, password...)
			k1 = append(k1, k...)
			k1 = append(k1, udata...)
		}
		block, err := aes.NewCipher(k[:16])
		if err != nil {
			return nil
		}
		e := make([]byte, len(k1))
		cipher.NewCBCEncrypter(block, k[16:32]).CryptBlocks(e, k1)
		sum := 0
		for _, b := range e[:16] {
			sum += int(b)
		}
		var hh hash.Hash
		switch sum % 3 {
		case 0:
			hh = sha256.New()
		case 1:
			hh = sha512.New384()
		default:
			hh = sha512.New()
		}
		hh.Write(e)
		k = hh.Sum(nil)
		if round >= 63 && int(e[len(e)-1]) <= round-31 {
			break
		}
	}
	return k[:32]
}

func aesCBCDecryptNoPad(key, iv, data []byte) ([]byte, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	if len(data)%16 != 0 {
		return nil, fmt.Errorf("data is not a whole number of AES blocks")
	}
	out := make([]byte, len(data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(out, data)
	return out, nil
}

// objectKey is the key for one object (algorithm 1); AES-256 uses the file
// key itself.
func (c *pdfCrypt) objectKey(ref pdfRef, method string) []byte {
	if method == "AESV3" {
		return c.key
	}
	h := md5.New()
	h.Write(c.key)
	h.Write([]byte{byte(ref.num), byte(ref.num >> 8), byte(ref.num >> 16), byte(ref.gen), byte(ref.gen >> 8)})
	if method == "AESV2" {
		h.Write([]byte("sAlT"))
	}
	k := h.Sum(nil)
	n := len(c.key) + 5
	if n > 16 {
		n = 16
	}
	return k[:n]
}

func (c *pdfCrypt) decrypt(data []byte, ref pdfRef, method string) ([]byte, error) {
	switch method {
	case "None":
		return data, nil
	case "AESV2", "AESV3":
		if len(data) < 32 || len(data)%16 != 0 {
			if len(data) == 0 {
				return data, nil
			}
			return nil, fmt.Errorf("%w: AES-encrypted data of %d bytes is not whole blocks", documents.ErrDamaged, len(data))
		}
		out, err := aesCBCDecryptNoPad(c.objectKey(ref, method), data[:16], data[16:])
		if err != nil {
			return nil, fmt.Errorf("%w: %v", documents.ErrDamaged, err)
		}
		if pad := int(out[len(out)-1]); pad >= 1 && pad <= 16 && pad <= len(out) {
			out = out[:len(out)-pad]
		}
		return out, nil
	}
	rc, err := rc4.NewCipher(c.objectKey(ref, method))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", documents.ErrDamaged, err)
	}
	out := make([]byte, len(data))
	rc.XORKeyStream(out, data)
	return out, nil
}

func (c *pdfCrypt) decryptStream(s *pdfStream) ([]byte, error) {
	return c.decrypt(s.raw, s.ref, c.stmMeth)
}

// decryptObject decrypts the strings in obj (depth-bounded like parsing).
func (c *pdfCrypt) decryptObject(obj any, ref pdfRef, depth int) any {
	if depth > 64 {
		return obj
	}
	switch v := obj.(type) {
	case pdfString:
		out, err := c.decrypt([]byte(v), ref, c.strMeth)
		if err != nil {
			return v
		}
		return pdfString(out)
	case pdfArray:
		out := make(pdfArray, len(v))
		for i, e := range v {
			out[i] = c.decryptObject(e, ref, depth+1)
		}
		return out
	case pdfDict:
		out := make(pdfDict, len(v))
		for k, e := range v {
			out[k] = c.decryptObject(e, ref, depth+1)
		}
		return out
	case *pdfStream:
		return &pdfStream{dict: c.decryptObject(v.dict, ref, depth+1).(pdfDict), raw: v.raw, ref: v.ref}
	}
	return obj
}
