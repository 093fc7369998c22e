/* Declarations of the row kernels (rows.c): a row_sparse key's rows on a kvstore server.
 *
 * Rows are `width` contiguous values; a table is `rows` of them; row ids are int64.  The
 * kernels check what memory safety depends on (ids inside the table) and report the first
 * bad position instead of touching memory there; the Python callers check first and give
 * the message.
 */
#ifndef MG_ROWS_H
#define MG_ROWS_H

#include "layers.h"

/* The sum of `parts` row sets over the union of their ids.  Part p holds counts[p] rows
 * with strictly increasing ids[p]; out_ids/out have room for the sum of the counts.
 * A row's sum starts from part 0's row where part 0 has it, else from +0, and adds the
 * other parts' rows in part order, each addition rounded to the dtype (float16 through
 * float32, as NumPy does).  Returns the number of rows written (sorted ids). */
typedef struct {
    int dtype;
    size_t width, parts;
    const int64_t *const *ids;
    const size_t *counts;
    const void *const *values;
    int64_t *out_ids;
    void *out;
} mg_rows_sum_args;
size_t mg_rows_sum(const mg_rows_sum_args *a);

/* table[ids[i]] += values[i] for i < k, in that order (a repeated id adds its rows one
 * after another, each addition rounded: np.add.at's bits).  Returns -1, or the first i
 * whose id is outside [0, rows) (nothing is added then). */
int64_t mg_rows_add_at(int dtype, void *table, size_t rows, size_t width, const int64_t *ids,
                       size_t k, const void *values);

/* out[i] = table[ids[i]] for i < k (row_bytes bytes each).  Returns -1, or the first i
 * whose id is outside [0, rows) (nothing is copied then). */
int64_t mg_rows_take(const void *table, size_t rows, size_t row_bytes, const int64_t *ids,
                     size_t k, void *out);

/* One SGD step (sgd.c's formula, so the same bits as the dense step) on the rows ids of
 * the weight table and of its momentum table (NULL: none), with grad row i for ids[i].
 * `step` holds the hyperparameters and dtype; its n, w, mom and grad are set here.
 * Returns -1, or the first i whose id is outside [0, rows) or not above ids[i - 1]
 * (nothing is updated then). */
int64_t mg_rows_sgd(const mg_sgd_args *step, void *w, void *mom, size_t rows, size_t width,
                    const int64_t *ids, size_t k, const void *grad);

/* One Adam step (optimizer/adam.py's NumPy lines, each operation rounded to the dtype in
 * the same order) on the rows ids of weight, mean and var; lr is already bias-corrected.
 * Returns as mg_rows_sgd. */
typedef struct {
    int dtype;
    double lr, beta1, beta2, epsilon, wd, rescale, clip; /* clip <= 0: no clipping */
} mg_adam_args;
int64_t mg_rows_adam(const mg_adam_args *a, void *w, void *mean, void *var, size_t rows,
                     size_t width, const int64_t *ids, size_t k, const void *grad);

#endif
