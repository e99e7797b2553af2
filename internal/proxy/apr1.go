package proxy

import (
	"crypto/md5"
	"strings"
)

// apr1 computes Apache's "$apr1$" MD5-based password hash (htpasswd's
// default format) of password with salt (at most 8 characters), written
// from the published algorithm: the MD5-crypt construction with the magic
// "$apr1$". It returns the full "$apr1$salt$hash" string.
func apr1(password, salt string) string {
	const magic = "$apr1$"
	if len(salt) > 8 {
		salt = salt[:8]
	}
	pw := []byte(password)
	alt := md5.Sum([]byte(password + salt + password))
	ctx := md5.New()
	ctx.Write(pw)
	ctx.Write([]byte(magic + salt))
	for i := len(pw); i > 0; i -= 16 {
		ctx.Write(alt[:min(16, i)])
	}
	for i := len(pw); i > 0; i >>= 1 {
		if i&1 != 0 {
			ctx.Write([]byte{0})
		} else if len(pw) > 0 {
			ctx.Write(pw[:1])
		}
	}
	final := ctx.Sum(nil)
	for i := range 1000 {
		c := md5.New()
		if i&1 != 0 {
			c.Write(pw)
		} else {
			c.Write(final)
		}
		if i%3 != 0 {
			c.Write([]byte(salt))
		}
		if i%7 != 0 {
			c.Write(pw)
		}
		if i&1 != 0 {
			c.Write(final)
		} else {
			c.Write(pw)
		}
		final = c.Sum(final[:0])
	}
	const itoa64 = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	var b strings.Builder
	b.WriteString(magic + salt + "$")
	to64 := func(v uint32, n int) {
		for ; n > 0; n-- {
			b.WriteByte(itoa64[v&0x3f])
			v >>= 6
		}
	}
	f := func(i int) uint32 { return uint32(final[i]) }
	to64(f(0)<<16|f(6)<<8|f(12), 4)
	to64(f(1)<<16|f(7)<<8|f(13), 4)
	to64(f(2)<<16|f(8)<<8|f(14), 4)
	to64(f(3)<<16|f(9)<<8|f(15), 4)
	to64(f(4)<<16|f(10)<<8|f(5), 4)
	to64(f(11), 2)
	return b.String()
}
