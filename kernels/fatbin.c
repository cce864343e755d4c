#include <errno.h>
#include <string.h>

#include "moe_kernels_image.h"

/*
 * The fatbin container, as nvcc -fatbin writes it (little-endian): a
 * 16-byte header (magic, version, header size, bytes of entries), then
 * entries, each a header (kind, version, header size, payload size, ...,
 * arch at byte 28) followed by its payload.
 */
#define FATBIN_MAGIC 0xba55ed50u
#define FATBIN_HEADER_MIN 16u
#define FATBIN_ENTRY_MIN 32u

static uint16_t get16(const unsigned char *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static uint32_t get32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

int moe_fatbin_list(const void *image, size_t size, struct moe_fatbin_entry *entries, size_t max,
		    size_t *count)
{
	const unsigned char *img = image;
	size_t at = 0, n = 0;

	if (size < FATBIN_HEADER_MIN || get32(img) != FATBIN_MAGIC)
		return -EINVAL;
	while (at < size) {
		uint64_t header, body, end;

		if (size - at < FATBIN_HEADER_MIN || get32(img + at) != FATBIN_MAGIC)
			return -EBADMSG;
		header = get16(img + at + 6);
		body = get64(img + at + 8);
		if (header < FATBIN_HEADER_MIN || header > size - at || body > size - at - header)
			return -EBADMSG;
		end = at + header + body;
		at += header;
		while (at < end) {
			uint64_t eh, payload;

			if (end - at < FATBIN_ENTRY_MIN)
				return -EBADMSG;
			eh = get32(img + at + 4);
			payload = get64(img + at + 8);
			if (eh < FATBIN_ENTRY_MIN || eh > end - at || payload > end - at - eh)
				return -EBADMSG;
			if (n < max) {
				entries[n].kind = get16(img + at);
				entries[n].arch = get32(img + at + 28);
				entries[n].offset = at + eh;
				entries[n].size = payload;
			}
			n++;
			at += eh + payload;
		}
	}
	*count = n;
	return 0;
}
