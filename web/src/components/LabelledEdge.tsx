// An edge whose label sits three quarters of the way to its target: a
// condition's or approval's branches leave one block side by side, and
// labels at their midpoints ran into one another ("assess.amount >= 1000
// default"); near their targets they are as far apart as the targets are.
import { BaseEdge, getBezierPath, type EdgeProps } from "@xyflow/react";

const MAX = 34;              // characters; the whole label stays in the title

export function LabelledEdge(props: EdgeProps) {
  const { sourceX, sourceY, targetX, targetY, sourcePosition, targetPosition, label } = props;
  const [path] = getBezierPath({ sourceX, sourceY, targetX, targetY, sourcePosition, targetPosition });
  // the cubic's point at t = 0.75 (control points as getBezierPath puts them)
  const reach = Math.max(Math.abs(targetY - sourceY) / 2, 25);
  const c1 = { x: sourceX, y: sourceY + reach };
  const c2 = { x: targetX, y: targetY - reach };
  const t = 0.75;
  const u = 1 - t;
  const labelX = u * u * u * sourceX + 3 * u * u * t * c1.x + 3 * u * t * t * c2.x + t * t * t * targetX;
  const labelY = u * u * u * sourceY + 3 * u * u * t * c1.y + 3 * u * t * t * c2.y + t * t * t * targetY;
  const text = typeof label === "string" && label.length > MAX ? `${label.slice(0, MAX - 1)}…` : label;
  return (
    <>
      <BaseEdge id={props.id} path={path} markerEnd={props.markerEnd} style={props.style}
                interactionWidth={props.interactionWidth}
                label={text} labelX={labelX} labelY={labelY} labelStyle={props.labelStyle}
                labelShowBg labelBgStyle={props.labelBgStyle} labelBgPadding={[4, 2]}
                labelBgBorderRadius={3} />
      {typeof label === "string" && text !== label && <title>{label}</title>}
    </>
  );
}

export const edgeTypes = { labelled: LabelledEdge };
