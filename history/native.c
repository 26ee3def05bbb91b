/* One pass over a block of history.jsonl lines, for history.jsonl_scan (loaded by
 * history/native.py; built by scripts/setup.sh into build/native/).
 *
 * Why C: the scan's numpy version makes some ten passes over every byte of the
 * block (newlines, a digit mask, its edges, their positions, the packed digits),
 * an Arrow regex over every line and an Arrow cast of the integer tokens; one
 * pass here does the same work at a fraction of the CPU (bench/history_to_parquet.py).
 * The results are the numpy version's, bit for bit (tests/checkers/test_native.py).
 *
 * scan_block: every column of history.jsonl_scan.Block in that pass: each line
 * parsed by the grammar of the regular expression history.jsonl_scan.FAST_LINE
 * (one of the two shapes HistoryWriter writes), its fields kept as it is parsed.
 *
 * fast_lines: the same parser's decision alone (the test compares it with the
 * regular expression, run by Arrow's RE2).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The parser of one line: p moves forward while the text matches. */
typedef struct { const uint8_t *p, *end; } cursor;

static int lit(cursor *c, const char *text)
{
    size_t len = strlen(text);
    if ((size_t)(c->end - c->p) < len || memcmp(c->p, text, len) != 0)
        return 0;
    c->p += len;
    return 1;
}

static int digit(cursor *c) { return c->p < c->end && (uint8_t)(*c->p - '0') < 10; }

/* 0|[1-9][0-9]{0,17} */
static int nat(cursor *c)
{
    if (c->p >= c->end)
        return 0;
    if (*c->p == '0') {
        c->p++;
        return 1;
    }
    if (!digit(c))
        return 0;
    c->p++;
    for (int k = 0; k < 17 && digit(c); k++)
        c->p++;
    return 1;
}

/* 0|-?[1-9][0-9]{0,17} */
static int integer(cursor *c)
{
    if (c->p < c->end && *c->p == '0') {
        c->p++;
        return 1;
    }
    if (c->p < c->end && *c->p == '-')
        c->p++;
    if (!digit(c) || *c->p == '0')
        return 0;
    return nat(c);
}

/* (,"error":"[ !#-\[\]-~]*")? -- absent when the next byte is not ',' */
static int error(cursor *c)
{
    if (c->p >= c->end || *c->p != ',')
        return 1;
    if (!lit(c, ",\"error\":\""))
        return 0;
    while (c->p < c->end && *c->p >= ' ' && *c->p <= '~' && *c->p != '"' && *c->p != '\\')
        c->p++;
    return lit(c, "\"");
}

/* scan_block: the whole scan of a block in one pass (what history.jsonl_scan.scan
 * otherwise computes with some forty numpy and Arrow operations and a regular
 * expression): each line is parsed by the grammar of FAST_LINE, and while it is
 * parsed its fields are kept: kind, type, index, process (and its text), a send's
 * key, value text and offset, an ok poll's segments (one per key) and pairs
 * (offset, value text). A line that turns out not to be one of the two shapes is
 * OTHER (kind 0) with its fields zero and its texts empty, and what it had added
 * to the segments and pairs is taken back. Outputs are sized by the caller
 * (history/native.py: lines, and n/5 + 2 segments and pairs, n text bytes each). */
typedef struct {
    int64_t *seg_line, *seg_key, *seg_first, *seg_pairs, *pair_offset;
    int32_t *value_offset;
    uint8_t *value_bytes;
    int64_t segs, pairs, line;
} reads_out;

typedef struct {
    int64_t index, process, key, offset;
    const uint8_t *process_at, *process_end, *value_at, *value_end;
    int type, kind, has_offset;
} line_out;

/* the value of the digits (and leading '-') from..to: exact, at most 18 digits */
static int64_t value_of(const uint8_t *from, const uint8_t *to)
{
    int negative = *from == '-';
    int64_t v = 0;
    for (from += negative; from < to; from++)
        v = v * 10 + (*from - '0');
    return negative ? -v : v;
}

static int nat_value(cursor *c, int64_t *value)
{
    const uint8_t *at = c->p;
    if (!nat(c))
        return 0;
    *value = value_of(at, c->p);
    return 1;
}

static int integer_value(cursor *c, int64_t *value)
{
    const uint8_t *at = c->p;
    if (!integer(c))
        return 0;
    *value = value_of(at, c->p);
    return 1;
}

/* [INT,INT] -> a pair (offset, value text) when r is given */
static int pair_out(cursor *c, reads_out *r)
{
    int64_t offset;
    if (!(lit(c, "[") && integer_value(c, &offset) && lit(c, ",")))
        return 0;
    const uint8_t *at = c->p;
    if (!(integer(c) && lit(c, "]")))
        return 0;
    if (r) {
        int64_t len = (c->p - 1) - at;
        int32_t used = r->value_offset[r->pairs];
        memcpy(r->value_bytes + used, at, (size_t)len);
        r->pair_offset[r->pairs] = offset;
        r->value_offset[++r->pairs] = used + (int32_t)len;
        r->seg_pairs[r->segs - 1]++;
    }
    return 1;
}

/* "INT":[(PAIR(,PAIR)*)?] -> a segment and its pairs when r is given */
static int key_reads_out(cursor *c, reads_out *r)
{
    int64_t key;
    if (!(lit(c, "\"") && integer_value(c, &key) && lit(c, "\":[")))
        return 0;
    if (r) {
        r->seg_line[r->segs] = r->line;
        r->seg_key[r->segs] = key;
        r->seg_first[r->segs] = r->pairs;
        r->seg_pairs[r->segs++] = 0;
    }
    if (c->p < c->end && *c->p == '[') {
        if (!pair_out(c, r))
            return 0;
        while (c->p < c->end && *c->p == ',') {
            c->p++;
            if (!pair_out(c, r))
                return 0;
        }
    }
    return lit(c, "]");
}

static int send_out(cursor *c, line_out *l)
{
    if (!(lit(c, "send\",\"value\":[") && integer_value(c, &l->key) && lit(c, ",")))
        return 0;
    if (c->p < c->end && *c->p == '[') {
        l->has_offset = 1;
        if (!(lit(c, "[") && integer_value(c, &l->offset) && lit(c, ",")))
            return 0;
        l->value_at = c->p;
        if (!integer(c))
            return 0;
        l->value_end = c->p;
        if (!lit(c, "]"))
            return 0;
    } else {
        l->value_at = c->p;
        if (!integer(c))
            return 0;
        l->value_end = c->p;
    }
    return lit(c, "]") && error(c);
}

static int poll_out(cursor *c, reads_out *r)
{
    if (!lit(c, "poll\",\"value\":"))
        return 0;
    if (lit(c, "null"))
        return error(c);
    if (!lit(c, "{"))
        return 0;
    if (c->p < c->end && *c->p == '"') {
        if (!key_reads_out(c, r))
            return 0;
        while (c->p < c->end && *c->p == ',') {
            c->p++;
            if (!key_reads_out(c, r))
                return 0;
        }
    }
    return lit(c, "}");
}

static const char *const TYPES[] = {"invoke", "ok", "fail", "info"};

/* one line, the grammar of fast_line; r gets an ok poll's reads (r may be NULL) */
static int parse_line(const uint8_t *start, const uint8_t *end, line_out *l, reads_out *r)
{
    cursor c = {start, end};
    if (!(lit(&c, "{\"index\":") && nat_value(&c, &l->index) && lit(&c, ",\"time\":")))
        return 0;
    if (c.p < c.end && *c.p == '-')
        c.p++;
    if (!(nat(&c) && lit(&c, ",\"process\":")))
        return 0;
    l->process_at = c.p;
    if (!nat_value(&c, &l->process))
        return 0;
    l->process_end = c.p;
    if (!lit(&c, ",\"type\":\""))
        return 0;
    for (l->type = 0; l->type < 4 && !lit(&c, TYPES[l->type]); l->type++)
        ;
    if (l->type == 4 || !lit(&c, "\",\"f\":\""))
        return 0;
    if (c.p < c.end && *c.p == 's') {
        l->kind = 1;
        if (!send_out(&c, l))
            return 0;
    } else {
        l->kind = 2;
        if (!poll_out(&c, l->type == 1 ? r : NULL))
            return 0;
    }
    return lit(&c, "}\n") && c.p == c.end;
}

/* fast[k] = whether line k (bytes line_start[k] .. line_end[k]-1) is one of the two shapes */
void fast_lines(const uint8_t *buf, const int64_t *line_start, const int64_t *line_end, int64_t n,
                uint8_t *fast)
{
    for (int64_t k = 0; k < n; k++)
    {
        line_out l = {0};
        fast[k] = (uint8_t)parse_line(buf + line_start[k], buf + line_end[k], &l, NULL);
    }
}

int64_t scan_block(const uint8_t *buf, int64_t n, int64_t *line_end, uint8_t *kind, uint8_t *type,
                   int64_t *index, int64_t *process, int64_t *send_key, int64_t *send_offset,
                   uint8_t *has_offset, int32_t *process_offset, uint8_t *process_bytes,
                   int32_t *send_value_offset, uint8_t *send_value_bytes,
                   int64_t *seg_line, int64_t *seg_key, int64_t *seg_first, int64_t *seg_pairs,
                   int64_t *pair_offset, int32_t *pair_value_offset, uint8_t *pair_value_bytes,
                   int64_t *counts)
{
    reads_out r = {seg_line, seg_key, seg_first, seg_pairs, pair_offset, pair_value_offset,
                   pair_value_bytes, 0, 0, 0};
    int64_t i = 0, lines = 0;
    int32_t process_used = 0, value_used = 0;
    process_offset[0] = send_value_offset[0] = pair_value_offset[0] = 0;
    while (i < n || (n == 0 && lines == 0)) {
        const uint8_t *newline = i < n ? memchr(buf + i, '\n', (size_t)(n - i)) : NULL;
        int64_t end = newline ? newline - buf + 1 : n;
        line_out l = {0};
        int64_t segs = r.segs, pairs = r.pairs;
        r.line = lines;
        if (parse_line(buf + i, buf + end, &l, &r)) {
            kind[lines] = (uint8_t)l.kind;
            type[lines] = (uint8_t)l.type;
            index[lines] = l.index;
            process[lines] = l.process;
            memcpy(process_bytes + process_used, l.process_at, (size_t)(l.process_end - l.process_at));
            process_used += (int32_t)(l.process_end - l.process_at);
            if (l.kind == 1) {
                send_key[lines] = l.key;
                send_offset[lines] = l.has_offset ? l.offset : 0;
                has_offset[lines] = (uint8_t)l.has_offset;
                memcpy(send_value_bytes + value_used, l.value_at, (size_t)(l.value_end - l.value_at));
                value_used += (int32_t)(l.value_end - l.value_at);
            } else {
                send_key[lines] = send_offset[lines] = 0;
                has_offset[lines] = 0;
            }
        } else {
            r.segs = segs;
            r.pairs = pairs;
            kind[lines] = type[lines] = has_offset[lines] = 0;
            index[lines] = process[lines] = send_key[lines] = send_offset[lines] = 0;
        }
        process_offset[lines + 1] = process_used;
        send_value_offset[lines + 1] = value_used;
        line_end[lines++] = end;
        i = end;
    }
    counts[0] = r.segs;
    counts[1] = r.pairs;
    return lines;
}

/* expand_reads: a run's read rows, one per [offset, value] pair, from its segments
 * (history.flatten_runs._polls): segment s (an ok poll's key, at line lo + rel[s], with
 * pairs[s] pairs) gives pairs[s] rows of its key, its line's process code, index and
 * invoke index, the pair's position pos (0, 1, ...), its session and seq first[s] + pos.
 * One pass writing the seven columns, where numpy took some fifteen passes over the
 * rows (repeats, ranges, gathers, adds): main thread ~0.1 CPU-s less per 5M reads. */
void expand_reads(int64_t segs, const int64_t *seg_key, const int64_t *seg_rel, const int64_t *seg_pairs,
                  const int64_t *seg_session, const int64_t *seg_first,
                  const int32_t *line_process, const int64_t *line_index, const int64_t *line_invoke,
                  int64_t *key, int32_t *process, int64_t *index, int32_t *pos, int64_t *session,
                  int64_t *invoke, int64_t *seq)
{
    int64_t row = 0;
    for (int64_t s = 0; s < segs; s++) {
        int64_t n = seg_pairs[s], r = seg_rel[s], k = seg_key[s], sess = seg_session[s], first = seg_first[s];
        int32_t proc = line_process[r];
        int64_t idx = line_index[r], inv = line_invoke[r];
        for (int64_t j = 0; j < n; j++, row++) {
            key[row] = k;
            process[row] = proc;
            index[row] = idx;
            pos[row] = (int32_t)j;
            session[row] = sess;
            invoke[row] = inv;
            seq[row] = first + j;
        }
    }
}

/* edn_json: Jepsen's flat EDN op maps rewritten into JSON in one pass, for
 * history.formats._read_edn (its byte-level rewrite, done here at once): whitespace
 * and commas separate; ( ) become [ ]; a keyword :name becomes "name"; nil becomes
 * null; a map's keys are followed by ':' (maps become JSON objects); the whole is
 * wrapped in [ ]. Strings, numbers, true and false are copied as they stand:
 * anything EDN has and JSON has not (symbols, ratios, 1N, odd escapes) leaves
 * invalid JSON, which the caller's JSON parser refuses. Returns the length of the
 * JSON, or -1 where the fast path does not apply (sets, tags, characters,
 * namespaced keywords, a NUL byte, nesting deeper than 64, and what is not a
 * history of flat op maps: see below). */
#define EDN_DEPTH 64

static int edn_space(uint8_t b)
{
    return b == ' ' || b == ',' || b == '\n' || b == '\t' || b == '\r' || b == '\f' || b == '\v';
}

static int edn_delimiter(uint8_t b)
{
    return edn_space(b) || b == '(' || b == ')' || b == '[' || b == ']' || b == '{' || b == '}'
        || b == '"' || b == ';';
}

static int keyword_start(uint8_t b)
{
    return (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') || b == '*' || b == '+' || b == '!'
        || b == '_' || b == '?' || b == '<' || b == '>' || b == '=' || b == '.' || b == '-';
}

static int keyword_char(uint8_t b) { return keyword_start(b) || (b >= '0' && b <= '9'); }

/* The op fields edn_json checks (a map's keys, as keywords or strings). */
enum { F_OTHER, F_TYPE, F_F, F_PROCESS, F_VALUE, F_INDEX };

static int field_of(const uint8_t *name, int64_t len)
{
    static const char *const names[] = {"type", "f", "process", "value", "index"};
    for (int k = 0; k < 5; k++)
        if ((int64_t)strlen(names[k]) == len && memcmp(name, names[k], (size_t)len) == 0)
            return k + 1;
    return F_OTHER;
}

static int op_type(const uint8_t *name, int64_t len)
{
    static const char *const types[] = {"invoke", "ok", "fail", "info"};
    for (int k = 0; k < 4; k++)
        if ((int64_t)strlen(types[k]) == len && memcmp(name, types[k], (size_t)len) == 0)
            return 1;
    return 0;
}

/* -?[0-9]+ (JSON then refuses what is not a JSON integer, such as 01) */
static int integer_token(const uint8_t *p, int64_t len)
{
    int64_t k = len > 0 && p[0] == '-';
    if (k >= len)
        return 0;
    for (; k < len; k++)
        if ((uint8_t)(p[k] - '0') >= 10)
            return 0;
    return 1;
}

/* The ops as history.formats._flat_ops would take them, checked here while the
 * bytes go by, so that Python has nothing left to do but orjson.loads: the forms
 * are a sequence of maps, or one vector or list of maps; no map inside an op;
 * every op has a :type (invoke ok fail info, a keyword or string), an :f (a
 * keyword or string) and a :process (a keyword, string or integer), each once;
 * an op without :value gets "value":null, one without :index gets its position
 * ("index":N), in that order, at its end (where _flat_ops would add them).
 * Anything else declines (-1): the Python readers then read the file.
 * maps[0] = the number of ops, maps[1] = their depth (2: inside one vector). */
int64_t edn_json(const uint8_t *in, int64_t n, uint8_t *out, int64_t *maps)
{
    int64_t i = 0, o = 0, opened = 0;
    int depth = 0, adjacent = 0;  /* adjacent: the last element ended right here (no space yet) */
    int op_depth = 0;              /* the depth of the op maps: 1 (a sequence) or 2 (one vector) */
    int field = F_OTHER, seen = 0; /* the current op's key being read; the fields it has */
    uint8_t kind[EDN_DEPTH + 1];    /* '[' or '{' */
    int64_t count[EDN_DEPTH + 1];  /* elements so far */
    kind[0] = '[';
    count[0] = 0;
    out[o++] = '[';
    while (i < n) {
        uint8_t c = in[i];
        if (edn_space(c)) {
            i++;
            adjacent = 0;
            continue;
        }
        if (c == ';') {
            while (i < n && in[i] != '\n')
                i++;
            adjacent = 0;
            continue;
        }
        if (c == ')' || c == ']' || c == '}') {
            uint8_t want = c == '}' ? '{' : '[';
            if (depth == 0 || kind[depth] != want)
                return -1;
            if (depth == op_depth) {  /* an op ends: complete it as _flat_ops would */
                if ((count[depth] & 1) || (seen & 0xE) != 0xE)
                    return -1;
                if (!(seen & (1 << F_VALUE))) {
                    memcpy(out + o, ",\"value\":null", 13);
                    o += 13;
                }
                if (!(seen & (1 << F_INDEX)))
                    o += sprintf((char *)out + o, ",\"index\":%lld", (long long)(opened - 1));
            }
            depth--;
            out[o++] = c == ')' ? ']' : c;
            i++;
            adjacent = 1;
            continue;
        }
        if (c == 0 || c == '#' || c == '\\')
            return -1;
        if (adjacent)  /* two elements with nothing between them ("a"1, ]1): left to the other readers */
            return -1;
        /* an element: where it stands among the ops */
        if (depth == 0) {
            if (op_depth == 0)
                op_depth = c == '{' ? 1 : (c == '[' || c == '(') ? 2 : -1;
            if (op_depth < 0 || (op_depth == 2 && count[0] > 0))
                return -1;
        }
        if ((depth == op_depth - 1) != (c == '{'))  /* the ops' sequence holds maps, and only it */
            return -1;
        int key = depth == op_depth && !(count[depth] & 1);  /* a key of an op */
        int value_of_field = depth == op_depth && (count[depth] & 1) ? field : F_OTHER;
        /* its separator from the one before */
        if (count[depth] > 0)
            out[o++] = (kind[depth] == '{' && (count[depth] & 1)) ? ':' : ',';
        count[depth]++;
        if (c == '(' || c == '[' || c == '{') {
            if (depth == EDN_DEPTH)
                return -1;
            if (key || value_of_field == F_TYPE || value_of_field == F_F || value_of_field == F_PROCESS)
                return -1;
            if (c == '{') {
                opened++;
                seen = 0;
            }
            depth++;
            kind[depth] = c == '{' ? '{' : '[';
            count[depth] = 0;
            out[o++] = c == '(' ? '[' : c;
            i++;
            continue;
        }
        int64_t start, end;  /* the element's text: a string's or keyword's without quote or colon */
        int text = 1;         /* a string or keyword */
        if (c == '"') {
            out[o++] = in[i++];
            start = i;
            while (i < n && in[i] != '"') {
                uint8_t b = in[i];
                if (b == '\n' || b == 0)
                    return -1;
                if (b == '\\') {
                    if (i + 1 >= n)
                        return -1;
                    uint8_t e = in[i + 1];
                    if (e != '"' && e != '\\' && e != 'n' && e != 't' && e != 'r')
                        return -1;
                    out[o++] = b;
                    i++;
                }
                out[o++] = in[i++];
            }
            if (i >= n)
                return -1;
            end = i;
            out[o++] = in[i++];
        } else if (c == ':') {
            start = ++i;
            if (i >= n || !keyword_start(in[i]))
                return -1;
            while (i < n && keyword_char(in[i]))
                i++;
            if (i < n && !(edn_space(in[i]) || in[i] == ')' || in[i] == ']' || in[i] == '}' || in[i] == ';'))
                return -1;
            end = i;
            out[o++] = '"';
            memcpy(out + o, in + start, (size_t)(i - start));
            o += i - start;
            out[o++] = '"';
        } else {
            text = 0;
            start = i;
            while (i < n && !edn_delimiter(in[i])) {
                if (in[i] == ':' || in[i] == '#' || in[i] == '\\' || in[i] == 0)
                    return -1;
                i++;
            }
            end = i;
            if (i - start == 3 && memcmp(in + start, "nil", 3) == 0) {
                memcpy(out + o, "null", 4);
                o += 4;
            } else {
                memcpy(out + o, in + start, (size_t)(i - start));
                o += i - start;
            }
        }
        if (key) {
            field = text ? field_of(in + start, end - start) : F_OTHER;
            if (field != F_OTHER) {
                if (seen & (1 << field))  /* a field twice: left to the other readers */
                    return -1;
                seen |= 1 << field;
            }
        } else if ((value_of_field == F_TYPE && !(text && op_type(in + start, end - start)))
                   || (value_of_field == F_F && !text)
                   || (value_of_field == F_PROCESS && !text && !integer_token(in + start, end - start))) {
            return -1;
        }
        adjacent = 1;
    }
    if (depth != 0 || op_depth == 0)
        return -1;
    out[o++] = ']';
    maps[0] = opened;
    maps[1] = op_depth;
    return o;
}
