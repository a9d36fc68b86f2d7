/* SPDX-License-Identifier: MIT */
/* The command line of nnt's programs (nnt-train, nnt-generate, nnt-tokenize): one table of
 * options per program, read by one parser. An entry names the option, its type, where its
 * value goes in the program's options structure, the values allowed, its initial value and
 * --help's text, so that parsing, the errors, --help and --version come out the same in every
 * program. Adding an option: one entry, and whatever the program does with its value. */
#ifndef NNT_EXAMPLES_CLI_H
#define NNT_EXAMPLES_CLI_H

#include <nnt.h>

#include <stddef.h>

/* Where a value goes: an int (FLAG: 1 when given; CHOICE: the index in `choices`, -1 when
 * none), an int64_t (INT), a double (REAL), a const char * (STR: the argument itself). ALIAS:
 * another spelling of the option its help names; GROUP: a heading of --help. */
typedef enum cli_type {
    CLI_FLAG, CLI_INT, CLI_REAL, CLI_STR, CLI_CHOICE, CLI_GROUP, CLI_ALIAS
} cli_type;

/* Flags of an entry: the range's minimum or maximum is excluded. Bits below CLI_OWN_BITS are
 * the program's own (e.g. what nnt-train records in its checkpoints). */
enum { CLI_OPEN_MIN = 1 << 16, CLI_OPEN_MAX = 1 << 17, CLI_OWN_BITS = 1 << 16 };

/* One option (name without "--"; a name of one character is also -c). min and max: the
 * range of an INT or REAL; choices: a CHOICE's names, NULL-terminated; def: the initial value
 * as text (NULL: 0, NULL, or -1 for a choice); arg: the value's name in --help; help: its
 * text ('\n' starts a line at column 24; "%s" stands for the program's help_fill; NULL: the
 * option is listed on the next entry's line). */
typedef struct cli_option {
    const char *name;
    cli_type type;
    size_t off;
    double min, max;
    int flags;
    const char *const *choices;
    const char *def, *arg, *help;
} cli_option;

/* A program's command line. head: --help's text before the options (usage and what the
 * program does), tail: after them; operands: the name of the arguments that are not options
 * (e.g. "INPUT"), NULL when it takes none. */
typedef struct cli_program {
    const char *name;
    const cli_option *options;
    int noptions;
    const char *head, *tail, *operands;
    const char *help_fill;
} cli_program;

/* Table entries; each program defines CLI_OFF(field) as offsetof(its options, field). */
#define OPT_GROUP(title) {NULL, CLI_GROUP, 0, 0, 0, 0, NULL, NULL, NULL, title}
#define OPT_ALIAS(nm, target) {nm, CLI_ALIAS, 0, 0, 0, 0, NULL, NULL, NULL, target}
#define OPT_FLAG(nm, f, fl, help) {nm, CLI_FLAG, CLI_OFF(f), 0, 0, fl, NULL, NULL, NULL, help}
#define OPT_INT(nm, f, lo, hi, def, fl, arg, help) \
    {nm, CLI_INT, CLI_OFF(f), lo, hi, fl, NULL, def, arg, help}
#define OPT_REAL(nm, f, lo, hi, def, fl, arg, help) \
    {nm, CLI_REAL, CLI_OFF(f), lo, hi, fl, NULL, def, arg, help}
#define OPT_STR(nm, f, def, fl, arg, help) \
    {nm, CLI_STR, CLI_OFF(f), 0, 0, fl, NULL, def, arg, help}
#define OPT_CHOICE(nm, f, c, def, fl, arg, help) \
    {nm, CLI_CHOICE, CLI_OFF(f), 0, 0, fl, c, def, arg, help}
#define CLI_BIG 9.0e15   /* integers up to here are exact in a double */

/* Parse argv into the options structure o: first every entry at its initial value, then the
 * options given (--name VALUE, --name=VALUE), marked in given[entry] when given is not NULL;
 * the operands go to operands[0..*noperands) (argv's pointers), in order ("--" ends the
 * options); operands may be argv + 1 (they are then moved to the front of argv). --help
 * (-h) and --version (-V) print and return 1; an error prints one line
 * "NAME: ..." on stderr and returns 2; else 0. */
int cli_parse(const cli_program *p, int argc, char **argv, void *o, unsigned char *given,
              char **operands, int *noperands);
/* Store value (NULL for a flag) of entry d in o, or print an error naming the option as
 * `shown` (NULL: --name) and return 2. */
int cli_set(const cli_program *p, const cli_option *d, void *o, const char *value,
            const char *shown);
/* The entry of option name (len characters, aliases followed); NULL when there is none. */
const cli_option *cli_find(const cli_program *p, const char *name, size_t len);
/* d's value in o as text: a string itself, a choice its index, a real with 17 digits. */
void cli_value_text(const cli_option *d, const void *o, char *out, size_t size);
/* The name of choice value of option, e.g. cli_choice_name(p, "optim", 2) = "sgd"; "?". */
const char *cli_choice_name(const cli_program *p, const char *option, int value);
/* The tokenizer_config.json beside a tokenizer.json (or in its directory, or in a model
 * directory), when there is one; NULL otherwise (malloc'd). */
char *cli_config_beside(const char *tokenizer_json);
/* The names of a comma-separated list (--label-names): *names (malloc'd, free it and
 * names[0]) and *n of them (at least 1: empty ones kept, for the library to refuse); 0, or
 * -1 when out of memory. */
int cli_names(const char *list, const char ***names, int64_t *n);
/* How many names such a list has (its commas + 1) */
int64_t cli_names_count(const char *list);
/* A --chat-template choice: "auto", or a name of nnt_chat_template_from_name. */
nnt_chat_template cli_chat_template(const char *name);
/* The --chat-template choices of prompt/answer data (nnt-tokenize --jsonl, nnt-train's
 * .jsonl --data): "auto", "none" and the library's names, NULL-terminated; and their help
 * line's list. */
extern const char *const cli_chat_templates[];
/* --problem-type's choices, transformers' problem_type names, at NNT_PROBLEM_* (the first,
 * single_label_classification, NNT_PROBLEM_DEFAULT) */
extern const char *const cli_problem_types[];
#define CLI_CHAT_TEMPLATE_LIST \
    "auto|none|chatml|llama3|qwen2.5|qwen3|llama3.1|\nllama3.2|gemma|gemma2|gemma3|phi3|" \
    "phi3.5|\nqwen3-2507|deepseek-r1|gpt-oss"
/* Print "NAME: " and the message on stderr; returns 2 (the status of bad usage). */
int cli_error(const char *program, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
