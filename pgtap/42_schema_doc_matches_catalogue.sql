-- docs/schema.md, "Columns", against the catalogue, so the page cannot
-- drift from migrations/ and sql/: every column it names exists in a
-- relation its section names, with the type it gives, and every column of
-- every table and view of schema lease (the internal _settings aside) is
-- named in a section of its relation. A section is a "### " heading naming
-- `lease.X` relations; each row of its tables is
--   | `col`[, `col`...] | `type` | meaning |
-- (`timestamptz` for timestamp with time zone). Runs from the source folder
-- (tests/CMakeLists.txt: WORKING_DIRECTORY), so the page is read as it is.
\set doc `cat docs/schema.md`
BEGIN;
SELECT plan(5);

CREATE TEMP TABLE doc_line AS
SELECT n, line FROM regexp_split_to_table(:'doc', E'\n') WITH ORDINALITY AS t(line, n);

-- The "## Columns" part of the page.
CREATE TEMP TABLE doc_part AS
SELECT l.n, l.line FROM doc_line l
 WHERE l.n > (SELECT min(n) FROM doc_line WHERE line = '## Columns')
   AND l.n < coalesce((SELECT min(n) FROM doc_line
                        WHERE line ~ '^## '
                          AND n > (SELECT min(n) FROM doc_line WHERE line = '## Columns')),
                      (SELECT max(n) + 1 FROM doc_line));

CREATE TEMP TABLE doc_section AS
SELECT n, array(SELECT m[1] FROM regexp_matches(line, '`lease\.([a-z_]+)`', 'g') AS m) AS rels
  FROM doc_part WHERE line ~ '^### ';

-- One row per documented column: the relations of its section, its type.
CREATE TEMP TABLE doc_column AS
SELECT (SELECT s.rels FROM doc_section s WHERE s.n < r.n ORDER BY s.n DESC LIMIT 1) AS rels,
       c[1] AS col,
       CASE t WHEN 'timestamptz' THEN 'timestamp with time zone' ELSE t END AS typ,
       r.n
  FROM doc_part r,
       LATERAL trim(both ' `' FROM split_part(r.line, '|', 3)) AS t,
       LATERAL regexp_matches(split_part(r.line, '|', 2), '`([a-z_]+)`', 'g') AS c
 WHERE r.line ~ '^\| `';

-- The catalogue: every column of schema lease's tables and views.
CREATE TEMP TABLE catalogue_column AS
SELECT c.relname::text AS rel, a.attname::text AS col,
       format_type(a.atttypid, a.atttypmod) AS typ
  FROM pg_class c
  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
 WHERE c.relnamespace = 'lease'::regnamespace AND c.relkind IN ('r', 'v', 'p')
   AND c.relname NOT LIKE '\_%';

SELECT cmp_ok((SELECT count(*)::int FROM doc_column), '>=', 200,
              'docs/schema.md, "Columns": the tables of the page were read');

SELECT is_empty(
    $$SELECT d.col || ' (docs/schema.md line ' || d.n || ')' FROM doc_column d
       WHERE NOT EXISTS (SELECT 1 FROM catalogue_column k
                          WHERE k.rel = ANY (d.rels) AND k.col = d.col)$$,
    'every column docs/schema.md names exists in a relation its section names');

SELECT is_empty(
    $$SELECT d.col || ': documented ' || d.typ || ', is ' || k.typ FROM doc_column d
       JOIN catalogue_column k ON k.rel = ANY (d.rels) AND k.col = d.col
       WHERE k.typ <> d.typ$$,
    'every documented column has the type docs/schema.md gives');

SELECT is_empty(
    $$SELECT k.rel || '.' || k.col FROM catalogue_column k
       WHERE NOT EXISTS (SELECT 1 FROM doc_column d
                          WHERE k.rel = ANY (d.rels) AND d.col = k.col)$$,
    'every column of every table and view of schema lease is in docs/schema.md');

SELECT is_empty(
    $$SELECT DISTINCT k.rel FROM catalogue_column k
       WHERE NOT EXISTS (SELECT 1 FROM doc_section s WHERE k.rel = ANY (s.rels))$$,
    'every table and view of schema lease has a section in docs/schema.md');

SELECT * FROM finish();
ROLLBACK;
