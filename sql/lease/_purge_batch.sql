CREATE OR REPLACE FUNCTION lease._purge_batch(tbl regclass, col name, order_col name, cutoff timestamp with time zone, batch integer, OUT purged bigint, OUT lag_ms bigint)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
DECLARE
    ids tid[];
    next_at timestamptz;
BEGIN
    -- The batch + 1 first rows in order_col's order (a B-tree: the cost is
    -- the batch's, however far behind the table is) that are past the
    -- cutoff: the first batch go, the one after says how far behind
    -- retention the table still is. When order_col is not col (the audit
    -- table's event id), a row inside retention stops the step early.
    EXECUTE format('SELECT coalesce(array_agg(d.c) FILTER (WHERE d.rn <= $2 AND d.at < $1), ''{}''),'
                   ' min(d.at) FILTER (WHERE d.rn > $2 AND d.at < $1)'
                   '  FROM (SELECT ctid AS c, %1$I AS at, row_number() OVER (ORDER BY %3$I) AS rn'
                   '          FROM %2$s %4$s ORDER BY %3$I LIMIT $2 + 1) d', col, tbl, order_col,
                   CASE WHEN order_col = col THEN format('WHERE %I < $1', col) ELSE '' END)
        INTO ids, next_at USING cutoff, batch;
    EXECUTE format('DELETE FROM %2$s WHERE ctid = ANY ($1) AND %1$I < $2', col, tbl)
        USING ids, cutoff;
    GET DIAGNOSTICS purged = ROW_COUNT;
    lag_ms := CASE WHEN next_at IS NULL THEN 0
              ELSE (extract(epoch FROM cutoff - next_at) * 1000)::bigint END;
END
$function$;

COMMENT ON FUNCTION lease._purge_batch(regclass,name,name,timestamp with time zone,integer) IS
    'Deletes the first batch rows of tbl in order_col''s order whose col is before cutoff (by row address, a TID scan); lag_ms: how far before the cutoff the oldest row left behind is (0: none left).';

REVOKE ALL ON FUNCTION lease._purge_batch(regclass,name,name,timestamp with time zone,integer) FROM PUBLIC;
