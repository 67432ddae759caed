package exo

import (
	"encoding/binary"
	"encoding/hex"
	"testing"
)

// sipRef64 are the 64 outputs of SipHash-2-4 in the test vector table of
// the SipHash paper (appendix A) and of the reference implementation's
// vectors.h (vectors_sip64): key 00 01 .. 0f, message i = the i bytes
// 00 01 .. i-1; each output as its 8 little-endian bytes.
var sipRef64 = [64]string{
	"310e0edd47db6f72", // 0
	"fd67dc93c539f874", // 1
	"5a4fa9d909806c0d", // 2
	"2d7efbd796666785", // 3
	"b7877127e09427cf", // 4
	"8da699cd64557618", // 5
	"cee3fe586e46c9cb", // 6
	"37d1018bf50002ab", // 7
	"6224939a79f5f593", // 8
	"b0e4a90bdf82009e", // 9
	"f3b9dd94c5bb5d7a", // 10
	"a7ad6b22462fb3f4", // 11
	"fbe50e86bc8f1e75", // 12
	"903d84c02756ea14", // 13
	"eef27a8e90ca23f7", // 14
	"e545be4961ca29a1", // 15
	"db9bc2577fcc2a3f", // 16
	"9447be2cf5e99a69", // 17
	"9cd38d96f0b3c14b", // 18
	"bd6179a71dc96dbb", // 19
	"98eea21af25cd6be", // 20
	"c7673b2eb0cbf2d0", // 21
	"883ea3e395675393", // 22
	"c8ce5ccd8c030ca8", // 23
	"94af49f6c650adb8", // 24
	"eab8858ade92e1bc", // 25
	"f315bb5bb835d817", // 26
	"adcf6b0763612e2f", // 27
	"a5c91da7acaa4dde", // 28
	"716595876650a2a6", // 29
	"28ef495c53a387ad", // 30
	"42c341d8fa92d832", // 31
	"ce7cf2722f512771", // 32
	"e37859f94623f3a7", // 33
	"381205bb1ab0e012", // 34
	"ae97a10fd434e015", // 35
	"b4a31508beff4d31", // 36
	"81396229f0907902", // 37
	"4d0cf49ee5d4dcca", // 38
	"5c73336a76d8bf9a", // 39
	"d0a704536ba93e0e", // 40
	"925958fcd6420cad", // 41
	"a915c29bc8067318", // 42
	"952b79f3bc0aa6d4", // 43
	"f21df2e41d4535f9", // 44
	"87577519048f53a9", // 45
	"10a56cf5dfcd9adb", // 46
	"eb75095ccd986cd0", // 47
	"51a9cb9ecba312e6", // 48
	"96afadfc2ce666c7", // 49
	"72fe52975a4364ee", // 50
	"5a1645b276d592a1", // 51
	"b274cb8ebf87870a", // 52
	"6f9bb4203de7b381", // 53
	"eaecb2a30b22a87f", // 54
	"9924a43cc1315724", // 55
	"bd838d3aafbf8db7", // 56
	"0b1a2a3265d51aea", // 57
	"135079a3231ce660", // 58
	"932b2846e4d70666", // 59
	"e1915f5cb1eca46c", // 60
	"f325965ca16d629f", // 61
	"575ff28e60381be5", // 62
	"724506eb4c328a95", // 63
}

// sipTestKey is 00 01 02 .. 0f, the paper's key and the golden vectors'.
var sipTestKey = [TagKeyLen]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}

func TestSipHash24Reference(t *testing.T) {
	k0, k1 := sipKey(&sipTestKey)
	if k0 != 0x0706050403020100 || k1 != 0x0f0e0d0c0b0a0908 {
		t.Fatalf("k0 %#x k1 %#x", k0, k1)
	}
	msg := make([]byte, 64)
	for i := range msg {
		msg[i] = byte(i)
	}
	for i, want := range sipRef64 {
		got := SipHash24(sipTestKey, msg[:i])
		var le [8]byte
		binary.LittleEndian.PutUint64(le[:], got)
		if hex.EncodeToString(le[:]) != want {
			t.Errorf("message of %d bytes: %x, want %s", i, le, want)
		}
		// The same message written in every split into two pieces.
		for cut := 0; cut <= i; cut++ {
			v0, v1, v2, v3 := sipInit(k0, k1)
			if sipFinish(v0, v1, v2, v3, 0, msg[:cut], msg[cut:i]) != got {
				t.Fatalf("message of %d bytes written as %d+%d: differs", i, cut, i-cut)
			}
		}
	}
	// The paper's worked example (appendix A): the 15-byte message
	// 00..0e gives a129ca6149be45e5.
	if got := SipHash24(sipTestKey, msg[:15]); got != 0xa129ca6149be45e5 {
		t.Errorf("paper example: %#x", got)
	}
}

func TestSipHash24Allocs(t *testing.T) {
	msg := make([]byte, 100)
	if n := testing.AllocsPerRun(100, func() { _ = SipHash24(sipTestKey, msg) }); n != 0 {
		t.Fatalf("%v allocs", n)
	}
}

func BenchmarkSipHash24(b *testing.B) {
	msg := make([]byte, 92) // the tag message of an n=5 frame with a 64-byte record
	b.SetBytes(int64(len(msg)))
	for i := 0; i < b.N; i++ {
		_ = SipHash24(sipTestKey, msg)
	}
}
