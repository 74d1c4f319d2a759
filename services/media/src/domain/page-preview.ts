/** What a web page offers as a media item's preview: its og:image / twitter:image and title. */
import { Parser } from "htmlparser2";

/** og:image / twitter:image (resolved against the page's URL) and <title> of an HTML page. */
export function pagePreview(html: string, pageUrl: string): { image?: string; title?: string } {
  let image: string | undefined;
  let title: string | undefined;
  let inTitle = false;
  const parser = new Parser({
    onopentag(name, attrs) {
      if (name === "meta") {
        const key = (attrs.property ?? attrs.name ?? "").toLowerCase();
        if (!image && (key === "og:image" || key === "og:image:url" || key === "og:image:secure_url" || key === "twitter:image" || key === "twitter:image:src") && attrs.content) {
          image = attrs.content;
        }
        if (!title && key === "og:title" && attrs.content) title = attrs.content;
      }
      if (name === "title") inTitle = true;
    },
    ontext(text) { if (inTitle && !title) title = text.trim() || undefined; },
    onclosetag(name) { if (name === "title") inTitle = false; },
  }, { decodeEntities: true });
  parser.write(html);
  parser.end();
  let resolved: string | undefined;
  if (image) { try { resolved = new URL(image, pageUrl).toString(); } catch { /* ignore a broken URL */ } }
  return { image: resolved, title };
}
