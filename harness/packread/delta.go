package packread

import "fmt"

// applyDelta is git's delta format applied to base: the base's size, the
// result's, then copy-from-base and insert instructions. Every bound is
// checked, so a damaged delta is an error, never a panic or a result of
// another size than it declares.
func applyDelta(base, delta []byte) ([]byte, error) {
	src, delta, ok := leb128(delta)
	if !ok || src != uint64(len(base)) {
		return nil, fmt.Errorf("%w: a delta's base is %d bytes, the delta expects %d", ErrMalformed, len(base), src)
	}
	size, delta, ok := leb128(delta)
	// One copy instruction of a byte or two copies up to 64 KiB.
	if !ok || size > uint64(len(base))+uint64(len(delta))<<16 {
		return nil, fmt.Errorf("%w: a delta's result size is unreadable or more than it could make", ErrMalformed)
	}
	out := make([]byte, 0, size)
	for len(delta) > 0 {
		cmd := delta[0]
		delta = delta[1:]
		switch {
		case cmd&0x80 != 0:
			var off, n uint64
			for i := range 4 {
				if cmd&(1<<i) != 0 {
					if len(delta) == 0 {
						return nil, fmt.Errorf("%w: a delta's copy is truncated", ErrMalformed)
					}
					off |= uint64(delta[0]) << (8 * i)
					delta = delta[1:]
				}
			}
			for i := range 3 {
				if cmd&(0x10<<i) != 0 {
					if len(delta) == 0 {
						return nil, fmt.Errorf("%w: a delta's copy is truncated", ErrMalformed)
					}
					n |= uint64(delta[0]) << (8 * i)
					delta = delta[1:]
				}
			}
			if n == 0 {
				n = 0x10000
			}
			if off+n > uint64(len(base)) || uint64(len(out))+n > size {
				return nil, fmt.Errorf("%w: a delta copies outside its base or past its size", ErrMalformed)
			}
			out = append(out, base[off:off+n]...)
		case cmd != 0:
			n := int(cmd)
			if n > len(delta) || uint64(len(out)+n) > size {
				return nil, fmt.Errorf("%w: a delta's insert is truncated or past its size", ErrMalformed)
			}
			out = append(out, delta[:n]...)
			delta = delta[n:]
		default:
			return nil, fmt.Errorf("%w: a delta holds the reserved instruction 0", ErrMalformed)
		}
	}
	if uint64(len(out)) != size {
		return nil, fmt.Errorf("%w: a delta gave %d bytes, it declares %d", ErrMalformed, len(out), size)
	}
	return out, nil
}

// leb128 is the little-endian base-128 number a delta starts with.
func leb128(b []byte) (uint64, []byte, bool) {
	var v uint64
	for i, shift := 0, 0; i < len(b) && shift < 64; i, shift = i+1, shift+7 {
		v |= uint64(b[i]&0x7f) << shift
		if b[i]&0x80 == 0 {
			return v, b[i+1:], true
		}
	}
	return 0, nil, false
}
