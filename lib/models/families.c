/* SPDX-License-Identifier: MIT */
/* The table of model families (lib/models/family.h) and what programs read of it through
 * nnt.h: nnt_model_preset (every family's presets) and nnt_model_family_info. */
#include "models.h"
#include "family.h"

#include <stdio.h>
#include <string.h>

#define MAX_FAMILIES 16

static const nnt_family *table[MAX_FAMILIES] = {&nnt_family_gpt2, &nnt_family_llama,
                                               &nnt_family_gemma, &nnt_family_moe,
                                               &nnt_family_olmo, &nnt_family_phi3,
                                               &nnt_family_phi, &nnt_family_granite,
                                               &nnt_family_stablelm, &nnt_family_gptneox,
                                               &nnt_family_starcoder2,
                                               &nnt_family_gptbigcode, &nnt_family_falcon};
static int nfamilies = 13;

const nnt_family *nnt_family_at(int i)
{
    return i >= 0 && i < nfamilies ? table[i] : NULL;
}

const nnt_family *nnt_family_find(int id)
{
    for (int i = 0; i < nfamilies; i++)
        if (table[i]->id == id)
            return table[i];
    return NULL;
}

int nnt_family_register(const nnt_family *f)
{
    if (!f || nfamilies == MAX_FAMILIES || nnt_family_find(f->id))
        return NNT_E_BUSY;
    table[nfamilies++] = f;
    return NNT_OK;
}

const nnt_family *nnt_family_of_hf(const char *name, int by_type, int *arch)
{
    for (int i = 0; i < nfamilies; i++)
        for (int a = 0; a < table[i]->narchs; a++) {
            const nnt_hf_arch *h = &table[i]->archs[a];
            if (strcmp(name, by_type ? h->model_type : h->architecture) == 0) {
                *arch = a;
                return table[i];
            }
        }
    return NULL;
}

/* ---- classifiers: transformers' *ForSequenceClassification of each causal architecture ---- */

#define SEQ_CLS "ForSequenceClassification"

/* Causal architectures whose classifier is not named by the rule (prefix + SEQ_CLS); a
 * NULL classifier: transformers has none. */
static const char *const CLASSIFIER_NAMES[][2] = {
    {"GPT2LMHeadModel", "GPT2ForSequenceClassification"},
    {"Gemma3ForCausalLM", "Gemma3TextForSequenceClassification"},
    {"Gemma3ForConditionalGeneration", NULL},   /* its classifier nests the text model apart */
    {"GraniteForCausalLM", NULL},
    {"OlmoeForCausalLM", NULL},
};

int nnt_hf_classifier_name(const char *causal, char *out, size_t size)
{
    for (size_t i = 0; i < sizeof CLASSIFIER_NAMES / sizeof CLASSIFIER_NAMES[0]; i++)
        if (strcmp(causal, CLASSIFIER_NAMES[i][0]) == 0) {
            if (!CLASSIFIER_NAMES[i][1])
                return 0;
            snprintf(out, size, "%s", CLASSIFIER_NAMES[i][1]);
            return 1;
        }
    size_t n = strlen(causal), k = strlen("ForCausalLM");
    if (n <= k || strcmp(causal + n - k, "ForCausalLM") != 0)
        return 0;
    snprintf(out, size, "%.*s%s", (int)(n - k), causal, SEQ_CLS);
    return 1;
}

const nnt_family *nnt_family_of_classifier(const char *name, int *arch)
{
    char want[128];
    for (int i = 0; i < nfamilies; i++)
        for (int a = 0; a < table[i]->narchs; a++)
            if (nnt_hf_classifier_name(table[i]->archs[a].architecture, want, sizeof want) &&
                strcmp(name, want) == 0) {
                *arch = a;
                return table[i];
            }
    return NULL;
}

void nnt_family_hf_names(int by_type, char *out, size_t size)
{
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; i < nfamilies; i++)
        for (int a = 0; a < table[i]->narchs && n < size; a++) {
            const nnt_hf_arch *h = &table[i]->archs[a];
            n += (size_t)snprintf(out + n, size - n, "%s%s", n ? ", " : "",
                                  by_type ? h->model_type : h->architecture);
        }
}

/* Every family's presets, ", "-separated. */
static void preset_names(char *out, size_t size)
{
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; i < nfamilies; i++)
        for (const char *const *p = table[i]->preset_names; *p && n < size; p++)
            n += (size_t)snprintf(out + n, size - n, "%s%s", n ? ", " : "", *p);
}

NNT_API int nnt_model_preset(const char *name, nnt_model_config *cfg)
{
    const char *fn = "nnt_model_preset";
    if (!name || !cfg)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: %s is NULL", fn, name ? "cfg" : "name");
    for (int i = 0; i < nfamilies; i++)
        if (table[i]->preset(name, cfg))
            return NNT_OK;
    char valid[NNT_ERRMSG_MAX];
    preset_names(valid, sizeof valid);
    return nnt_fail(NULL, NNT_E_INVAL, "%s: unknown preset '%s' (valid: %s)", fn, name, valid);
}

/* ", "-joined lists of a family, kept for the process's life (nnt_family_info points into
 * them). */
typedef struct family_texts {
    char archs[512], types[256], presets[512];
} family_texts;

static family_texts texts[MAX_FAMILIES];

static void fill_texts(int i)
{
    const nnt_family *f = table[i];
    family_texts *t = &texts[i];
    size_t a = 0, m = 0, p = 0;
    t->archs[0] = t->types[0] = t->presets[0] = '\0';
    for (int k = 0; k < f->narchs; k++) {
        if (a < sizeof t->archs)
            a += (size_t)snprintf(t->archs + a, sizeof t->archs - a, "%s%s", k ? ", " : "",
                                  f->archs[k].architecture);
        if (m < sizeof t->types)
            m += (size_t)snprintf(t->types + m, sizeof t->types - m, "%s%s", k ? ", " : "",
                                  f->archs[k].model_type);
    }
    for (const char *const *s = f->preset_names; *s && p < sizeof t->presets; s++)
        p += (size_t)snprintf(t->presets + p, sizeof t->presets - p, "%s%s", p ? ", " : "", *s);
}

NNT_API int nnt_model_family_info(int index, nnt_family_info *info)
{
    const char *fn = "nnt_model_family_info";
    if (!info)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: info is NULL", fn);
    if (info->size < sizeof(nnt_family_info))
        return nnt_fail(NULL, NNT_E_INVAL, "%s: info->size %zu < sizeof(nnt_family_info) %zu "
                        "(initialise it with NNT_FAMILY_INFO_INIT)", fn, info->size,
                        sizeof(nnt_family_info));
    const nnt_family *f = nnt_family_at(index);
    if (!f)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: no family %d (there are %d)", fn, index,
                        nfamilies);
    fill_texts(index);
    info->family = f->id;
    info->name = f->name;
    info->title = f->title;
    info->architectures = texts[index].archs;
    info->model_types = texts[index].types;
    info->presets = texts[index].presets;
    info->features = f->features;
    return NNT_OK;
}
