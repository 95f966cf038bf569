-- Header words told apart by a tag before each lexeme (`f:` from, `t:` to, `c:` cc, `s:`
-- subject) instead of a weight: the GIN index keeps no weights, so a weighted term read back
-- every row holding the word; a tagged one is answered by the index alone. Rewritten in place
-- from the weighted `tsvector`s, positions kept.
UPDATE message_header_words h
SET words = COALESCE((
    SELECT string_agg(
        '''' || replace(replace(tagged.lexeme, '\', '\\'), '''', '''''') || ''':'
            || tagged.positions,
        ' ')
    FROM (
        SELECT CASE p.weight WHEN 'A' THEN 'f:' WHEN 'B' THEN 't:' WHEN 'C' THEN 'c:' ELSE 's:' END
                   || u.lexeme AS lexeme,
               string_agg(p.pos::text, ',' ORDER BY p.pos) AS positions
        FROM unnest(h.words) AS u(lexeme, positions, weights),
             unnest(u.positions, u.weights) AS p(pos, weight)
        GROUP BY 1
    ) AS tagged
    WHERE octet_length(tagged.lexeme) <= 2046
), '')::tsvector;
