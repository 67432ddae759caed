/* hexread.c: reads testdata/vectors/vectors.hex the way the XDP program's
 * test harness does (skip "//" lines, one 64-bit word per line, records of
 * EXO_VEC_RECORD_WORDS words) and checks the record framing, not the
 * verdicts: magic and index, frame bytes zero beyond frame_len, the state
 * unchanged unless ACCEPT, on ACCEPT out_append = seq+1, epoch_start kept
 * and the agreement rule (appending s agrees s-h only if s >= epoch_start
 * && s-epoch_start >= h), the chaining of stream steps, the tag key in
 * every record and, with its own SipHash-2-4, the tag of every decoded
 * frame against the record's tag-valid flag (format 3; format 4: under
 * the key of the slot its key phase names). It prints the
 * same lines as hexread_tb.v, which tools/vecgen's test compares with Go.
 *
 *   gcc -std=c99 -Wall -Wextra -Werror -I testdata/vectors \
 *       -o /tmp/hexread tools/vecgen/testdata/hexread.c
 *   /tmp/hexread testdata/vectors/vectors.hex
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vectors.h"

#define FIELD(rec, F) \
	(((rec)[EXO_VEC_##F##_WORD] >> EXO_VEC_##F##_LSB) & \
	 ((EXO_VEC_##F##_MSB - EXO_VEC_##F##_LSB) == 63 ? ~0ULL : ((1ULL << (EXO_VEC_##F##_MSB - EXO_VEC_##F##_LSB + 1)) - 1)))

/* sip24 is SipHash-2-4 of m[0..n) under (k0, k1), the reference way:
 * little-endian 8-byte blocks, the last one holding the length in its top
 * byte. */
#define ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                           \
	do {                                                               \
		v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32); \
		v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                     \
		v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                     \
		v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32); \
	} while (0)
static uint64_t sip24(uint64_t k0, uint64_t k1, const unsigned char *m, size_t n)
{
	uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL;
	uint64_t v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
	uint64_t b;
	size_t i, j;

	for (i = 0; i + 8 <= n; i += 8) {
		b = 0;
		for (j = 0; j < 8; j++)
			b |= (uint64_t)m[i + j] << (8 * j);
		v3 ^= b; SIPROUND; SIPROUND; v0 ^= b;
	}
	b = (uint64_t)n << 56;
	for (j = 0; i + j < n; j++)
		b |= (uint64_t)m[i + j] << (8 * j);
	v3 ^= b; SIPROUND; SIPROUND; v0 ^= b;
	v2 ^= 0xff;
	SIPROUND; SIPROUND; SIPROUND; SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

/* frame_byte returns byte k of the frame of record rec (MSB first). */
static unsigned frame_byte(const uint64_t *rec, int k)
{
	return (unsigned)(rec[EXO_VEC_FRAME_WORD + k / 8] >> (56 - 8 * (k % 8))) & 0xFF;
}

int main(int argc, char **argv)
{
	FILE *f;
	char line[256];
	uint64_t *mem;
	size_t n = 0, cap = (size_t)EXO_VEC_COUNT * EXO_VEC_RECORD_WORDS;
	unsigned long counts[256] = {0};
	uint32_t sum = 0;
	int errors = 0, tags_valid = 0;
	size_t i;
	int k;

	if (argc != 2) {
		fprintf(stderr, "usage: hexread vectors.hex\n");
		return 2;
	}
	f = fopen(argv[1], "r");
	if (!f) {
		perror(argv[1]);
		return 2;
	}
	mem = calloc(cap, sizeof *mem);
	if (!mem)
		return 2;
	while (fgets(line, sizeof line, f)) {
		char *end;
		if (line[0] == '/' || line[0] == '\n')
			continue;
		if (n == cap) {
			fprintf(stderr, "more words than EXO_VEC_COUNT records\n");
			return 1;
		}
		mem[n++] = strtoull(line, &end, 16);
		if (end != line + 16) {
			fprintf(stderr, "bad line: %s", line);
			return 1;
		}
	}
	fclose(f);
	if (n != cap) {
		fprintf(stderr, "%zu words, want %zu\n", n, cap);
		return 1;
	}
	for (i = 0; i < (size_t)EXO_VEC_COUNT; i++) {
		const uint64_t *rec = mem + i * EXO_VEC_RECORD_WORDS;
		int flen = (int)FIELD(rec, FRAME_LEN);
		unsigned vflags = (unsigned)FIELD(rec, VFLAGS);
		unsigned reason = (unsigned)FIELD(rec, REASON);
		unsigned stage = (unsigned)FIELD(rec, STAGE);
		if (FIELD(rec, MAGIC) != EXO_VEC_MAGIC || FIELD(rec, INDEX) != i) {
			printf("record %zu: bad magic or index\n", i);
			errors++;
		}
		counts[reason]++;
		/* The key (words 4-5), and the tag of every decoded frame:
		 * SipHash-2-4 of frame[0:24] || frame[32:exo_len], big-endian
		 * at frame[24:32]; vflags says whether it is valid. */
		if (FIELD(rec, TAG_KEY_0_7) != EXO_VEC_TAG_KEY_0_7 || FIELD(rec, TAG_KEY_8_15) != EXO_VEC_TAG_KEY_8_15) {
			printf("record %zu: tag key differs from EXO_VEC_TAG_KEY_*\n", i);
			errors++;
		}
		if (vflags & EXO_VEC_FLAG_TAG_VALID)
			tags_valid++;
		if (FIELD(rec, TAG_KEY1_0_7) != EXO_VEC_TAG_KEY1_0_7 || FIELD(rec, TAG_KEY1_8_15) != EXO_VEC_TAG_KEY1_8_15) {
			printf("record %zu: slot-1 tag key differs from EXO_VEC_TAG_KEY1_*\n", i);
			errors++;
		}
		if (FIELD(rec, EXO_LEN) > 0) {
			/* Format 4: the key phase bit (flags 0x4000, frame byte 14
			 * bit 6) picks the slot; slot 1 may be empty (vflags). */
			static const unsigned char key0[16] = EXO_VEC_TAG_KEY_BYTES;
			static const unsigned char key1[16] = EXO_VEC_TAG_KEY1_BYTES;
			int phase = (frame_byte(rec, 14) >> 6) & 1;
			int slot_ok = !phase || (vflags & EXO_VEC_FLAG_KEY1_VALID);
			const unsigned char *key = phase ? key1 : key0;
			unsigned char m[EXO_VEC_FRAME_MAX];
			uint64_t k0 = 0, k1 = 0, tag = 0;
			int elen = (int)FIELD(rec, EXO_LEN), n = 0;
			for (k = 0; k < 8; k++) {
				k0 |= (uint64_t)key[k] << (8 * k);
				k1 |= (uint64_t)key[8 + k] << (8 * k);
			}
			if (!phase && (k0 != EXO_VEC_TAG_K0 || k1 != EXO_VEC_TAG_K1)) {
				printf("record %zu: EXO_VEC_TAG_K0/K1 are not the key's little-endian halves\n", i);
				errors++;
			}
			if (phase && (k0 != EXO_VEC_TAG1_K0 || k1 != EXO_VEC_TAG1_K1)) {
				printf("record %zu: EXO_VEC_TAG1_K0/K1 are not the slot-1 key's little-endian halves\n", i);
				errors++;
			}
			for (k = 0; k < elen; k++) {
				if (k < 24 || k >= 32)
					m[n++] = (unsigned char)frame_byte(rec, k);
				else
					tag = tag << 8 | frame_byte(rec, k);
			}
			if ((slot_ok && sip24(k0, k1, m, (size_t)n) == tag) != !!(vflags & EXO_VEC_FLAG_TAG_VALID)) {
				printf("record %zu: the tag's validity differs from vflags\n", i);
				errors++;
			}
		}
		for (k = 0; k < EXO_VEC_FRAME_MAX; k++) {
			unsigned b = frame_byte(rec, k);
			if (k < flen)
				sum = sum * 31 + b;
			else if (b != 0) {
				printf("record %zu: frame byte %d beyond frame_len is %02x\n", i, k, b);
				errors++;
			}
		}
		if (stage == EXO_VEC_STAGE_ACCEPT) {
			uint64_t seq = rec[EXO_VEC_FRAME_WORD + 2];
			uint64_t h = FIELD(rec, IN_H), es = FIELD(rec, IN_EPOCH_START);
			uint64_t agreed = FIELD(rec, IN_AGREED);
			if (seq >= es && seq - es >= h && seq - h + 1 > agreed)
				agreed = seq - h + 1;
			if (FIELD(rec, OUT_APPEND) != seq + 1) {
				printf("record %zu: ACCEPT but out_append != seq+1\n", i);
				errors++;
			}
			if (FIELD(rec, OUT_AGREED) != agreed || FIELD(rec, OUT_EPOCH_START) != es) {
				printf("record %zu: ACCEPT but out_agreed/out_epoch_start do not follow the agreement rule\n", i);
				errors++;
			}
		} else if (memcmp(rec + EXO_VEC_STATE_IN_WORD, rec + EXO_VEC_STATE_OUT_WORD, EXO_VEC_STATE_WORDS * sizeof *rec) != 0) {
			printf("record %zu: reason %u changed the state\n", i, reason);
			errors++;
		}
		if ((vflags & EXO_VEC_FLAG_CHAINED) &&
		    (i == 0 || memcmp(rec + EXO_VEC_STATE_IN_WORD, rec - EXO_VEC_RECORD_WORDS + EXO_VEC_STATE_OUT_WORD,
				      EXO_VEC_STATE_WORDS * sizeof *rec) != 0)) {
			printf("record %zu: chained, but state in is not the previous state out\n", i);
			errors++;
		}
	}
	printf("records %d\n", EXO_VEC_COUNT);
	printf("checksum %08" PRIx32 "\n", sum);
	for (k = 0; k < 256; k++)
		if (counts[k])
			printf("reason %d %lu\n", k, counts[k]);
	printf("tags_valid %d\n", tags_valid);
	printf("errors %d\n", errors);
	free(mem);
	return errors != 0;
}
