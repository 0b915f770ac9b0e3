CREATE OR REPLACE FUNCTION lease._purge_batch(tbl regclass, col name, cutoff timestamp with time zone, batch integer, OUT purged bigint, OUT lag_ms bigint)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
DECLARE
    ids tid[];
    next_at timestamptz;
BEGIN
    -- batch + 1 oldest rows past the cutoff: the first batch go, the one
    -- after them says how far behind retention the table still is.
    EXECUTE format('SELECT coalesce(array_agg(d.c) FILTER (WHERE d.rn <= $2), ''{}''),'
                   ' min(d.at) FILTER (WHERE d.rn > $2)'
                   '  FROM (SELECT ctid AS c, %1$I AS at, row_number() OVER (ORDER BY %1$I) AS rn'
                   '          FROM %2$s WHERE %1$I < $1 ORDER BY %1$I LIMIT $2 + 1) d', col, tbl)
        INTO ids, next_at USING cutoff, batch;
    EXECUTE format('DELETE FROM %2$s WHERE ctid = ANY ($1) AND %1$I < $2', col, tbl)
        USING ids, cutoff;
    GET DIAGNOSTICS purged = ROW_COUNT;
    lag_ms := CASE WHEN next_at IS NULL THEN 0
              ELSE (extract(epoch FROM cutoff - next_at) * 1000)::bigint END;
END
$function$;

COMMENT ON FUNCTION lease._purge_batch(regclass,name,timestamp with time zone,integer) IS
    'Deletes the batch oldest rows of tbl whose col is before cutoff (by row address, a TID scan); lag_ms: how far before the cutoff the oldest row left behind is (0: none left).';

REVOKE ALL ON FUNCTION lease._purge_batch(regclass,name,timestamp with time zone,integer) FROM PUBLIC;
