/* One pass over a block of history.jsonl lines, for history.jsonl_scan (loaded by
 * history/native.py; built by scripts/setup.sh into build/native/).
 *
 * Why C: the scan's numpy version makes some ten passes over every byte of the
 * block (newlines, a digit mask, its edges, their positions, the packed digits),
 * an Arrow regex over every line and an Arrow cast of the integer tokens; one
 * pass here does the same work at a fraction of the CPU (bench/history_to_parquet.py).
 * The results are the numpy version's, bit for bit (tests/checkers/test_native.py).
 *
 * scan_tokens: line ends; tokens (maximal runs of the bytes 0-9 and '-'): start,
 * end, integer value, and their bytes packed (an Arrow string array's offsets and data).
 *
 * fast_lines: whether each line is exactly one of the two shapes HistoryWriter
 * writes, the regular expression history.jsonl_scan.FAST_LINE, decided the same way.
 */
#include <stdint.h>
#include <string.h>

int64_t scan_tokens(const uint8_t *buf, int64_t n, int64_t *line_end, int64_t *n_lines,
                    int64_t *tok_start, int64_t *tok_end, int64_t *tok_value,
                    int32_t *tok_offset, uint8_t *tok_bytes)
{
    int64_t t = 0, lines = 0, packed = 0, i = 0;
    tok_offset[0] = 0;
    while (i < n) {
        uint8_t c = buf[i];
        if ((uint8_t)(c - '0') < 10 || c == '-') {
            int64_t start = i;
            int negative = 0;
            uint64_t value = 0;
            for (; i < n; i++) {
                uint8_t b = buf[i];
                if ((uint8_t)(b - '0') < 10)
                    value = value * 10 + (uint64_t)(b - '0');
                else if (b == '-')
                    negative = 1;
                else
                    break;
                tok_bytes[packed++] = b;
            }
            /* exact for the tokens read as integers: canonical, at most 18 digits (FAST_LINE) */
            tok_start[t] = start;
            tok_end[t] = i;
            tok_value[t] = negative ? -(int64_t)value : (int64_t)value;
            tok_offset[++t] = (int32_t)packed;
            continue;
        }
        if (c == '\n')
            line_end[lines++] = i + 1;
        i++;
    }
    *n_lines = lines;
    return t;
}

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

/* \[INT,INT\] */
static int pair(cursor *c) { return lit(c, "[") && integer(c) && lit(c, ",") && integer(c) && lit(c, "]"); }

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

/* "INT":\[(PAIR(,PAIR)*)?\] */
static int key_reads(cursor *c)
{
    if (!(lit(c, "\"") && integer(c) && lit(c, "\":[")))
        return 0;
    if (c->p < c->end && *c->p == '[') {
        if (!pair(c))
            return 0;
        while (c->p < c->end && *c->p == ',') {
            c->p++;
            if (!pair(c))
                return 0;
        }
    }
    return lit(c, "]");
}

static int send(cursor *c)
{
    if (!(lit(c, "send\",\"value\":[") && integer(c) && lit(c, ",")))
        return 0;
    if (c->p < c->end && *c->p == '[') {
        if (!pair(c))
            return 0;
    } else if (!integer(c)) {
        return 0;
    }
    return lit(c, "]") && error(c);
}

static int poll(cursor *c)
{
    if (!lit(c, "poll\",\"value\":"))
        return 0;
    if (lit(c, "null"))
        return error(c);
    if (!lit(c, "{"))
        return 0;
    if (c->p < c->end && *c->p == '"') {
        if (!key_reads(c))
            return 0;
        while (c->p < c->end && *c->p == ',') {
            c->p++;
            if (!key_reads(c))
                return 0;
        }
    }
    return lit(c, "}");
}

static int fast_line(const uint8_t *start, const uint8_t *end)
{
    cursor c = {start, end};
    if (!(lit(&c, "{\"index\":") && nat(&c) && lit(&c, ",\"time\":")))
        return 0;
    if (c.p < c.end && *c.p == '-')
        c.p++;
    if (!(nat(&c) && lit(&c, ",\"process\":") && nat(&c) && lit(&c, ",\"type\":\"")))
        return 0;
    if (!(lit(&c, "invoke") || lit(&c, "ok") || lit(&c, "fail") || lit(&c, "info")))
        return 0;
    if (!lit(&c, "\",\"f\":\""))
        return 0;
    if (!(c.p < c.end && *c.p == 's' ? send(&c) : poll(&c)))
        return 0;
    return lit(&c, "}\n") && c.p == c.end;
}

/* fast[k] = whether line k (bytes line_start[k] .. line_end[k]-1) is one of the two shapes */
void fast_lines(const uint8_t *buf, const int64_t *line_start, const int64_t *line_end, int64_t n,
                uint8_t *fast)
{
    for (int64_t k = 0; k < n; k++)
        fast[k] = (uint8_t)fast_line(buf + line_start[k], buf + line_end[k]);
}

/* edn_json: Jepsen's flat EDN op maps rewritten into JSON in one pass, for
 * history.formats._read_edn (its byte-level rewrite, done here at once): whitespace
 * and commas separate; ( ) become [ ]; a keyword :name becomes "name"; nil becomes
 * null; a map's keys are followed by ':' (maps become JSON objects); the whole is
 * wrapped in [ ]. Strings, numbers, true and false are copied as they stand:
 * anything EDN has and JSON has not (symbols, ratios, 1N, odd escapes) leaves
 * invalid JSON, which the caller's JSON parser refuses. Returns the length of the
 * JSON, or -1 where the fast path does not apply (sets, tags, characters,
 * namespaced keywords, a NUL byte, nesting deeper than 64); *maps counts the '{'. */
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

int64_t edn_json(const uint8_t *in, int64_t n, uint8_t *out, int64_t *maps)
{
    int64_t i = 0, o = 0, opened = 0;
    int depth = 0, adjacent = 0;  /* adjacent: the last element ended right here (no space yet) */
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
        /* an element: its separator from the one before */
        if (count[depth] > 0)
            out[o++] = (kind[depth] == '{' && (count[depth] & 1)) ? ':' : ',';
        count[depth]++;
        if (c == '(' || c == '[' || c == '{') {
            if (depth == EDN_DEPTH)
                return -1;
            depth++;
            kind[depth] = c == '{' ? '{' : '[';
            count[depth] = 0;
            opened += c == '{';
            out[o++] = c == '(' ? '[' : c;
            i++;
            continue;
        } else if (c == '"') {
            out[o++] = in[i++];
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
            out[o++] = in[i++];
        } else if (c == ':') {
            int64_t start = ++i;
            if (i >= n || !keyword_start(in[i]))
                return -1;
            while (i < n && keyword_char(in[i]))
                i++;
            if (i < n && !(edn_space(in[i]) || in[i] == ')' || in[i] == ']' || in[i] == '}' || in[i] == ';'))
                return -1;
            out[o++] = '"';
            memcpy(out + o, in + start, (size_t)(i - start));
            o += i - start;
            out[o++] = '"';
        } else {
            int64_t start = i;
            while (i < n && !edn_delimiter(in[i])) {
                if (in[i] == ':' || in[i] == '#' || in[i] == '\\' || in[i] == 0)
                    return -1;
                i++;
            }
            if (i - start == 3 && memcmp(in + start, "nil", 3) == 0) {
                memcpy(out + o, "null", 4);
                o += 4;
            } else {
                memcpy(out + o, in + start, (size_t)(i - start));
                o += i - start;
            }
        }
        adjacent = 1;
    }
    if (depth != 0)
        return -1;
    out[o++] = ']';
    *maps = opened;
    return o;
}
