CREATE OR REPLACE FUNCTION lease._typed_batch_size(counts integer[]) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN (array_remove(counts, NULL))[1] BETWEEN 1 AND 100
                 AND (array_remove(counts, NULL))[1] = ALL (array_remove(counts, NULL))
            THEN (array_remove(counts, NULL))[1] END;

COMMENT ON FUNCTION lease._typed_batch_size(integer[]) IS
    'The number of items of a typed batch (lease.renew_many_brief_typed, release_many_brief_typed) from the cardinality of each argument array: every array that is not NULL holds one element per item, 1 to 100 of them; NULL when they disagree or the count is out of range (the batch is refused as a whole). A NULL array is NULL for every item, as a NULL argument of the single typed call. An expression, no query: called on a variable it inlines into the caller''s expression.';

REVOKE ALL ON FUNCTION lease._typed_batch_size(integer[]) FROM PUBLIC;
