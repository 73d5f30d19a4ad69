// The C side of package fabric: it owns every libfabric object. Go holds
// opaque handles (fs_server, fs_conn) and reads and writes only plain
// integer fields and the registered staging buffer, all of them C memory.
#ifndef FABRIC_SHIM_H
#define FABRIC_SHIM_H

#include <stddef.h>
#include <stdint.h>

// Result classes of the shim's calls; the Go side maps them to sentinels.
enum {
	FS_OK = 0,
	FS_ENOPROV = 1,   // no provider offers FI_EP_MSG with FI_RMA|FI_ATOMIC
	FS_EUNAVAIL = 2,  // peer refused, gone, timed out, or connection broken
	FS_EINVAL = 3,    // bad argument (address, region)
	FS_EFAIL = 4,     // any other libfabric failure
	FS_ETIMEOUT = 5,  // a round's watchdog expired with operations outstanding
	FS_ESHUTDOWN = 6, // the peer shut the connection down
	FS_EBADCTX = 7,   // a completion named no outstanding operation
	FS_ECANCEL = 8,   // the caller cancelled the round (cancel) with operations outstanding
};

// Operation kinds (equal to the Go OpKind values).
enum { FS_READ = 1, FS_WRITE = 2, FS_CAS = 3, FS_FAA = 4 };

#define FS_ERRLEN 256

// One operation of a round, written by Go before fs_conn_run and read back
// after. Integers only: no pointer field.
struct fs_op {
	uint64_t raddr;    // remote address (region base + offset)
	uint64_t key;      // remote key
	uint64_t len;      // READ/WRITE bytes
	uint64_t soff;     // offset of this op's slot in the staging buffer
	uint64_t compare;  // CAS compare value
	uint64_t operand;  // CAS swap value, FAA addend
	uint64_t old;      // out: CAS/FAA previous value
	int32_t kind;      // FS_READ ... FS_FAA
	int32_t err;       // out: 0 or the positive fi_errno of its completion
	int32_t prov_errno;// out: provider-specific error (verbs: ibv_wc_status)
	int32_t fenced;    // out: posted with FI_FENCE
};

// A region registered by a server.
struct fs_region {
	uint64_t base; // remote address of byte 0 (VA if FI_MR_VIRT_ADDR, else 0)
	uint64_t key;  // fi_mr_key
	uint64_t len;
};

struct fs_server;
struct fs_conn;

// Public fields of a server handle (the rest is private to shim.c).
struct fs_server_pub {
	char err[FS_ERRLEN];
	char host[64], port[16]; // bound address after fs_server_listen
	char prov[32];
	int endpoints;           // accepted, not yet shut down
};

// Public fields of a connection handle.
struct fs_conn_pub {
	char err[FS_ERRLEN];
	char prov[32];
	struct fs_op *ops;       // capacity window
	uint8_t *staging;        // registered buffer of staging_len bytes
	uint64_t staging_len;
	uint64_t max_msg;        // ep_attr->max_msg_size
	int window;              // max operations per round (send-queue size, capped)
	int blocking;            // 1: block in fi_cq_sread; 0: busy-poll
	int atomics;             // 1: FI_UINT64 CSWAP and SUM are valid
	int verbs_atomic_bug;    // 1: verbs provider with libfabric < 2.2
	int workaround;          // 1: the value-as-pointer workaround is applied
	uint64_t msg_order;      // tx_attr->msg_order
	uint64_t order_raw_size; // ep_attr->max_order_raw_size
	uint64_t order_war_size; // ep_attr->max_order_war_size
	uint64_t order_waw_size; // ep_attr->max_order_waw_size
	uint32_t cancel;         // set atomically by Go while a round runs: give it up
};

uint32_t fs_version(void);

struct fs_server *fs_server_new(void);
struct fs_server_pub *fs_server_pub(struct fs_server *s);
int fs_server_open(struct fs_server *s, const char *prov, const char *host,
		   const char *port, const char *domain);
int fs_server_reg(struct fs_server *s, void *addr, uint64_t len,
		  struct fs_region *out);
int fs_server_listen(struct fs_server *s);
int fs_server_poll(struct fs_server *s, int timeout_ms);
void fs_server_close(struct fs_server *s);

struct fs_conn *fs_conn_new(void);
struct fs_conn_pub *fs_conn_pub(struct fs_conn *c);
int fs_conn_open(struct fs_conn *c, const char *prov, const char *host,
		 const char *port, const char *domain, int timeout_ms,
		 uint64_t staging_len, int workaround);
int fs_conn_grow(struct fs_conn *c, uint64_t staging_len);
int fs_conn_run(struct fs_conn *c, int n, int timeout_ms);
void fs_conn_close(struct fs_conn *c);

// fs_list writes one line "prov\tfabric\tdomain\n" per fi_info that offers
// FI_EP_MSG with FI_RMA|FI_ATOMIC into buf (n bytes).
int fs_list(char *buf, size_t n, char *err);

#endif
